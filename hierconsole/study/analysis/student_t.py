"""Student's t distribution's quantile, in plain Python.

The intervals need t(0.975, n-1) for any n up to 100,000 (`seeds_to_resolve` searches that far), and the
analysis layer must not need scipy at run time (the light commands and the console load it). The survival
function is the regularised incomplete beta function, evaluated by its continued fraction (modified
Lentz); the quantile refines a normal-based start by Newton steps on that survival function, kept inside a
bracket. Tested against `scipy.stats.t` in tests/study/analysis/test_statistics.py.
"""

from __future__ import annotations

import functools
import math
from statistics import NormalDist

CF_MAX_TERMS = 20_000
"""Terms of the continued fraction before giving up; a = df/2 = 50,000 needs a few hundred."""
CF_EPS = 1e-16
"""The continued fraction stops once a term changes it by less than this, relatively."""
CF_TINY = 1e-300
"""Lentz's guard against a zero denominator (the value replacing an exact 0)."""
QUANTILE_RTOL = 4e-16
"""Newton stops once a step moves t by less than this, relatively: about two float64 ulps."""
NEWTON_MAX_STEPS = 100


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularised incomplete beta function (Numerical Recipes' betacf)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    d = CF_TINY if abs(d) < CF_TINY else d
    d = 1.0 / d
    h = d
    for m in range(1, CF_MAX_TERMS + 1):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = CF_TINY if abs(d) < CF_TINY else d
        c = 1.0 + aa / c
        c = CF_TINY if abs(c) < CF_TINY else c
        d = 1.0 / d
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = CF_TINY if abs(d) < CF_TINY else d
        c = 1.0 + aa / c
        c = CF_TINY if abs(c) < CF_TINY else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < CF_EPS:
            return h
    raise ArithmeticError(f"incomplete beta continued fraction did not converge (a={a}, b={b}, x={x})")


SERIES_FROM = 20.0
"""From this a on, log(Gamma(a + 1/2) / Gamma(a)) comes from its asymptotic series: the difference of two
lgamma values of size a log a would lose their last digits (1e-11 relative at a = 50,000)."""


def _log_gamma_ratio_half(a: float) -> float:
    """log(Gamma(a + 1/2) / Gamma(a)), to full precision for every a > 0."""
    if a < SERIES_FROM:
        return math.lgamma(a + 0.5) - math.lgamma(a)
    inv = 1.0 / a
    inv2 = inv * inv
    return 0.5 * math.log(a) - inv * (
        1 / 8 - inv2 * (1 / 192 - inv2 * (1 / 640 - inv2 * (17 / 14336 - inv2 * 31 / 18432)))
    )


def _log_beta(a: float, b: float) -> float:
    """log B(a, b); for b = 1/2 (or a = 1/2), the t distribution's case, through the accurate ratio."""
    if b == 0.5:
        return math.lgamma(0.5) - _log_gamma_ratio_half(a)
    if a == 0.5:
        return math.lgamma(0.5) - _log_gamma_ratio_half(b)
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def _betainc(a: float, b: float, x: float, y: float, log_x: float, log_y: float) -> float:
    """I_x(a, b) given x, y = 1 - x and their logarithms, each to full precision (for the t distribution
    they come straight from t^2/df: a = df/2 multiplies log x, so its rounding would be multiplied too)."""
    front = math.exp(a * log_x + b * log_y - _log_beta(a, b))
    # The fraction converges fast below the mean of Beta(a, b); above it, use I_x(a, b) = 1 - I_{1-x}(b, a).
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, y) / b


CENTRAL_BELOW = 1.0
"""Below this |t|, P(0 < T < t) is computed and the tail is 1/2 minus it; above, the tail directly: each
side is then the small term of its formula, so neither loses digits to cancellation."""


def _t_tail(t: float, df: float) -> float:
    """P(T > t) for t >= 0: I_x(df/2, 1/2) / 2 with x = df/(df+t^2), 1 - x = t^2/(df+t^2) passed exactly."""
    if t == 0.0:
        return 0.5
    r = t * t / df
    log_x, log_y = -math.log1p(r), math.log(r) - math.log1p(r)
    return 0.5 * _betainc(0.5 * df, 0.5, 1.0 / (1.0 + r), r / (1.0 + r), log_x, log_y)


def _t_central(t: float, df: float) -> float:
    """P(0 < T < t) for t >= 0: I_y(1/2, df/2) / 2 with y = t^2/(df+t^2)."""
    if t == 0.0:
        return 0.0
    r = t * t / df
    log_x, log_y = -math.log1p(r), math.log(r) - math.log1p(r)
    return 0.5 * _betainc(0.5, 0.5 * df, r / (1.0 + r), 1.0 / (1.0 + r), log_y, log_x)


def t_pdf(t: float, df: float) -> float:
    log_norm = _log_gamma_ratio_half(0.5 * df) - 0.5 * math.log(df * math.pi)
    return math.exp(log_norm - 0.5 * (df + 1.0) * math.log1p(t * t / df))


@functools.lru_cache(maxsize=4096)
def t_ppf(p: float, df: float) -> float:
    """The p-quantile of Student's t with `df` > 0 degrees of freedom (cached: the intervals ask for the
    same few quantiles over and over)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"t quantile needs 0 < p < 1, not {p}")
    if df <= 0:
        raise ValueError(f"t quantile needs df > 0, not {df}")
    if p == 0.5:
        return 0.0
    # By symmetry, solve for the upper tail q = P(T > |t|) < 1/2: p itself below the median, and 1 - p above
    # it (exact in float64 there), so a far lower tail keeps its digits.
    return _t_isf(1.0 - p, df) if p > 0.5 else -_t_isf(p, df)


def _t_isf(q: float, df: float) -> float:
    """The t > 0 with P(T > t) = q, for 0 < q < 1/2."""
    if df == 1:  # Cauchy: cot(pi q), as tan(pi (1/2 - q)) near the centre where the cotangent cancels
        return math.tan(math.pi * (0.5 - q)) if q > 0.25 else 1.0 / math.tan(math.pi * q)
    if df == 2:
        return (1.0 - 2.0 * q) / math.sqrt(2.0 * q * (1.0 - q))
    # Near the centre, match P(0 < T < t) = 1/2 - q instead (exact for q >= 1/4): each target is the small
    # probability on its side of t, so it keeps its digits.
    central = q > 0.25
    target = 0.5 - q if central else q
    t = _cornish_fisher(-NormalDist().inv_cdf(q), df)
    lo, hi = 0.0, math.inf  # the root's bracket, narrowed by every evaluation: Newton never leaves it
    for _ in range(NEWTON_MAX_STEPS):
        below = (target - _t_central(t, df)) if central else (_t_tail(t, df) - target)  # > 0: t too small
        if below > 0:
            lo = t
        else:
            hi = t
        new = t + below / t_pdf(t, df)
        if not lo < new < hi:
            new = 2.0 * t if math.isinf(hi) else 0.5 * (lo + hi)  # overshot: widen, or bisect the bracket
        if abs(new - t) <= QUANTILE_RTOL * abs(new):
            return new
        t = new
    return t


def _cornish_fisher(z: float, df: float) -> float:
    """The t quantile at normal quantile z to order 1/df^4 (Abramowitz & Stegun 26.7.5): within 1e-6 of
    the root from df = 10 on, so Newton needs one or two steps; a rough start for small df is still safe."""
    z2 = z * z
    g1 = z * (z2 + 1) / 4
    g2 = z * ((5 * z2 + 16) * z2 + 3) / 96
    g3 = z * (((3 * z2 + 19) * z2 + 17) * z2 - 15) / 384
    g4 = z * ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) / 92160
    return z + (g1 + (g2 + (g3 + g4 / df) / df) / df) / df
