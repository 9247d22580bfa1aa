"""The configuration hashes of every shipped preset and family (and of a preset of defaults), recorded
before presets could name levels (issue 41): a study's `preset_sha256`, a family's sha256 and the
replication stages key on them, so a new option or a changed default must leave them as they are
(new options are None by default and left out of the hashed document while None)."""

from __future__ import annotations

import pytest

from hierconsole.config import list_presets, load_preset
from hierconsole.config.family import list_families, load_family
from hierconsole.config.preset import Preset

PRESET_SHA256 = {
    "cub": "7927305fbe19a60d6648999cfea59c3cb0ec1e049bdd28898bfce3b4b18ad9eb",
    "cub-taxonomy-regression": "7c9aa28c82a75f6b3b01bff96a302d439a220383916019fe37808d83c876ec2d",
    "cub-tune": "7090ac398babec53d4e2227f33f78a326fea4709b34e82cc2494f49642cbc445",
    "demo": "4ac5bd5add67794f4b7bbaffdd105f25cce5145d7ad457ff198f2397ee182c62",
    "nabirds-parent-disjoint": "ffd6270f5745d873ce7490d99524d19fc075ef69235300fca9af0e8185058edd",
    "nabirds-seen-class": "09ecf05e0465d1a987d3cc4271b817b576ab333c57a6ddcd50cac5f956ecedba",
}

FAMILY_SHA256 = {
    "cub-genus-disjoint": "98739bf6098f6e38119ed27707d0c0bed2516564a6d8c1a7afcddf6ec12eb090",
    "cub-genus-disjoint-outer-arms": "24b82e2f10df78214d2b754b0e2171f1fe01f6425973804ab851a3be2fb74a5c",
    "nabirds-curvature-control": "674de0afd9a8a963815914eea79c7087537cf9b750435b5fd3d9e66a0fedf4de",
    "nabirds-parent-disjoint-outer": "22968d6f9676b984df7e7bca7ae6ebea3d62846494b32fdb0fa77505508710c3",
    "nabirds-parent-disjoint-outer-arms": "9695fd764c5a6c931347bc145c38ebfde515d36f359d6ae596e7bbf1def7df7d",
    "nabirds-semantic-control": "1d7cb483896268c089e5c14d9d813dbd80863ce39ab2816999f116887f1e1560",
}

MEMBER_SHA256 = {
    "cub-genus-disjoint/split-1": "4c99224f3e829bd64bf7587d3b04d1baae3bf4c37c82dc0a4746cd1bca641669",
    "cub-genus-disjoint/split-2": "3d2c7ffd0461f79db65f60df51ae78b3e416fd8c035054f1e73e74957db2d078",
    "cub-genus-disjoint/split-3": "c25854ee0b13e2b3c4909a4cba2112d030cfa6dadca6f9dfe7d1a8edf84bd4e3",
    "cub-genus-disjoint-outer-arms/split-1.matched": "1c933deae9a1750ba58aad5d499dff74092a9465e4fb521663e1ccbb3c982095",
    "cub-genus-disjoint-outer-arms/split-1.supcon": "de3101c2000bf28f33fefd317809a9df261eef92500ce493835351ffbffb5ace",
    "cub-genus-disjoint-outer-arms/split-2.matched": "22c4caa4c450b7bd8a883e16f5c95d868524871734ebd52731fab01171bc8820",
    "cub-genus-disjoint-outer-arms/split-2.supcon": "9107cfa9806d9f04d813c35a0c734893046cad4cac3dbf5c95677755bf975d23",
    "cub-genus-disjoint-outer-arms/split-3.matched": "a680efb1d77261c713c0c6f6de43c2235670da82a1dc1b9a4124f35b23899b2f",
    "cub-genus-disjoint-outer-arms/split-3.supcon": "054228040ba13bd8d67bfae417036cd7ffdc78b41c0a9aabe1466c1c7acf14d2",
    "nabirds-curvature-control/euclidean": "71914df04ded32bc33e4e98f74de6a6fdf90e2e55117babdf41a58f123055b2f",
    "nabirds-curvature-control/near-flat": "465d63d2cc90e15b8e0aef959f54c14716242a313c0ff3116ca662a492cf7cb7",
    "nabirds-curvature-control/base": "4e13151a69be438107a6c25d6632a13c8aabd3022f85783ad2b4e036c795e342",
    "nabirds-curvature-control/strong": "c3aba7a94f3a2575309e87196231f787fecfc5c9f31a040c44c628268cee07ed",
    "nabirds-curvature-control/small-radius": "6470e2891c864eea86597c0c4cad30dcfdf2549f43d5e9f175c37834b130f992",
    "nabirds-curvature-control/large-radius": "2f4314df9716eb162afd365cec7d1ba25ab684e338a8684b8952c9741be591c1",
    "nabirds-parent-disjoint-outer/split-1": "34be5455d4d354aa368bc8a45eef3af778ca90e24bf0945c8d78915800696f59",
    "nabirds-parent-disjoint-outer/split-2": "64191070bae4c26660bc3f95adf545d10d1f7df54426d00c6731c4b0a353f88a",
    "nabirds-parent-disjoint-outer/split-3": "4d21b4adbb1b6c0df97cc15e4c8d891db2d49d73268037cb21438151a9374a88",
    "nabirds-parent-disjoint-outer-arms/split-1.matched": "17839cd0d84eb8d5220f059a0f6a02f532e555b70618a16352a74f002c2164d7",
    "nabirds-parent-disjoint-outer-arms/split-1.supcon": "6f343a81df6220fb7aee9206c7e7a91127aeaf166dabae3677cd45bacd31eedd",
    "nabirds-parent-disjoint-outer-arms/split-2.matched": "41d05c92acac01798f2a821f41aaa88a815e2a983e104476bfdb815c575b7c47",
    "nabirds-parent-disjoint-outer-arms/split-2.supcon": "ff6d429f4a292626edd1e4b3a48dc9e88581749c37115225d63d9fa960693f18",
    "nabirds-parent-disjoint-outer-arms/split-3.matched": "3fea7dded16f07f2194f31ae7ffa9b3b77137b68e5942ea01e6e6a55991ec6a1",
    "nabirds-parent-disjoint-outer-arms/split-3.supcon": "1dc67c875dacd86352a48e8df2f4e613553033dd4b4a6e064fa2ed6ec6e6e31e",
    "nabirds-semantic-control/leaf-only": "0be49dc31020cfb96cd8193e741be291845c456e5d45c26dc2b0ffda41ee6794",
    "nabirds-semantic-control/leaf-parent": "bd4f87dcbcbda360adcff8faabd1ed403da4cd495a4a798c49c6a2af4ca439e5",
    "nabirds-semantic-control/full": "1fba851455e50c633214375a0d31cb0ded6908ed6fd8abe8f412072af13e95e8",
    "nabirds-semantic-control/shuffled": "b8de79413ef8c713bfda6fa21bc486dde0b4410c626ed732a82fecbc4ee53d3a",
}

MINIMAL = {
    "study": {"name": "t"},
    "data": {"dataset": "synthetic:demo"},
    "evaluation": {"aggregation": "micro", "n_query": 10},
    "geometry": {"poincare": {"c": 1.0, "r": 0.4}},
    "temperature": {"euclidean": 0.2, "poincare": 0.2},
}
MINIMAL_SHA256 = "a827369965dfc6406be31c107a5a53a28411d08cd0243279e14100bb3c7ed31f"


def test_every_shipped_preset_is_recorded() -> None:
    assert sorted(name for name, _, _ in list_presets()) == sorted(PRESET_SHA256)
    assert sorted(name for name, _, _ in list_families()) == sorted(FAMILY_SHA256)


@pytest.mark.parametrize("name", sorted(PRESET_SHA256))
def test_shipped_preset_hash_unchanged(name: str) -> None:
    assert load_preset(name).sha256() == PRESET_SHA256[name]


@pytest.mark.parametrize("name", sorted(FAMILY_SHA256))
def test_shipped_family_hash_unchanged(name: str) -> None:
    family = load_family(name)
    assert {f"{name}/{m.name}": m.preset.sha256() for m in family.members} == {
        key: value for key, value in MEMBER_SHA256.items() if key.startswith(f"{name}/")
    }
    assert family.sha256() == FAMILY_SHA256[name]


def test_preset_of_defaults_hash_unchanged() -> None:
    """Every default is in the hashed document: a new option or a changed default moves this hash."""
    assert Preset.from_dict(MINIMAL).sha256() == MINIMAL_SHA256
