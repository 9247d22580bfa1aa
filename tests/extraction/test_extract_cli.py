"""`hierconsole extract` end to end on a real image folder: shapes, ids, determinism, resume after a real
interruption, unreadable images, weights files in every layout, errors that create nothing, import."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import Dinov2Config, Dinov2Model

from hierconsole.cli import main
from tests.extraction.conftest import CORRUPT, N_IMAGES, TINY, make_cub_folder

pytestmark = pytest.mark.slow  # extraction in subprocesses

ROOT = Path(__file__).resolve().parents[2]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, " ".join(out.split()), " ".join(err.split())


def extract(capsys, folder, out: Path, *extra, seed: int | None = 0, model=None) -> tuple[int, str, str]:
    weights = ["--weights", "none", "--seed", str(seed)] if seed is not None else []
    return run(
        capsys,
        "extract", "cub", folder.root, "-o", out, *weights, *(["--model", model] if model else []),
        "--batch-size", "4", "--shard-size", "8", "--workers", "0", *extra,
    )  # fmt: skip


def features(path: Path) -> tuple[list[str], np.ndarray]:
    with np.load(path, allow_pickle=False) as z:
        return [str(i) for i in z["ids"]], z["features"]


def files_under(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def test_features_are_keyed_by_image_id_and_the_corrupt_image_is_reported(
    capsys, cub_images, tiny_model, tmp_path
):
    out = tmp_path / "f.npz"
    code, text, err = extract(capsys, cub_images, out, model=tiny_model)
    assert code == 0, err
    ids, x = features(out)
    expected = [i for i in cub_images.ids if i != str(CORRUPT)]
    assert ids == expected  # images.txt order, the unreadable one left out
    assert x.shape == (N_IMAGES - 1, TINY["hidden_size"]) and x.dtype == np.float32
    assert np.isfinite(x).all() and len({row.tobytes() for row in x}) == len(x)
    corrupt_path = cub_images.paths[CORRUPT - 1]
    assert "RANDOM weights (seed 0)" in text and "1 image could not be read" in text
    assert corrupt_path in text and "truncated" in text.lower()
    manifest = json.loads((tmp_path / "f.manifest.json").read_text())
    assert manifest["failed"] == [
        {"id": str(CORRUPT), "path": corrupt_path, "reason": manifest["failed"][0]["reason"]}
    ]
    assert "truncated" in manifest["failed"][0]["reason"].lower()
    assert manifest["weights"] == {
        "kind": "random",
        "path": None,
        "seed": 0,
        "sha256": None,
        "pretrained": False,
    }
    assert manifest["model"]["config"]["hidden_size"] == 32 and manifest["n_features"] == N_IMAGES - 1
    assert manifest["preprocessing"]["resize_shorter"] == 256 and manifest["preprocessing"]["crop"] == 224
    assert manifest["torch"] == torch.__version__ and manifest["device"].startswith("cpu")
    with np.load(out) as z:  # the manifest also travels inside the features file
        assert json.loads(str(z["manifest"]))["images_sha256"] == manifest["images_sha256"]
    assert not (tmp_path / "f.npz.parts").exists()


def test_rerun_and_worker_processes_give_identical_features(capsys, cub_images, tiny_model, tmp_path):
    assert extract(capsys, cub_images, tmp_path / "a.npz", model=tiny_model)[0] == 0
    assert extract(capsys, cub_images, tmp_path / "b.npz", model=tiny_model)[0] == 0
    code, _, err = run(
        capsys, "extract", "cub", cub_images.root, "-o", tmp_path / "c.npz", "--weights", "none", "--seed", "0",
        "--model", tiny_model, "--batch-size", "4", "--shard-size", "8", "--workers", "2",
    )  # fmt: skip
    assert code == 0, err
    a, b, c = (features(tmp_path / f"{n}.npz") for n in "abc")
    assert a[0] == b[0] == c[0]
    assert a[1].tobytes() == b[1].tobytes() == c[1].tobytes()
    other = extract(capsys, cub_images, tmp_path / "d.npz", model=tiny_model, seed=1)
    assert other[0] == 0 and not np.array_equal(features(tmp_path / "d.npz")[1], a[1])


def _cli(*argv) -> list[str]:
    return [sys.executable, "-m", "hierconsole", *[str(a) for a in argv]]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def test_a_stopped_extraction_resumes_to_identical_features(capsys, cub_images, tiny_model, tmp_path):
    whole = tmp_path / "whole.npz"
    assert extract(capsys, cub_images, whole, model=tiny_model)[0] == 0
    out = tmp_path / "part.npz"
    code, text, err = extract(capsys, cub_images, out, "--stop-after", "10", model=tiny_model)
    assert code == 0, err
    assert "stopped" in text and not out.exists()
    # 10 images round up to two shards of 8; the other two wait.
    assert files_under(tmp_path / "part.npz.parts") == ["run.json", "shard-00000.npz", "shard-00001.npz"]
    code, text, err = extract(capsys, cub_images, out, model=tiny_model)
    assert code == 0, err
    assert "resumed: 2 finished shards" in text
    assert features(out)[0] == features(whole)[0]
    assert features(out)[1].tobytes() == features(whole)[1].tobytes()


def test_a_killed_extraction_resumes_to_identical_features(capsys, tmp_path):
    """SIGKILL while the process waits on an image (a named pipe nobody writes): the shards before it
    are on disk, the one in progress is lost, and the rerun computes exactly the missing ones."""
    folder = make_cub_folder(tmp_path / "data")
    folder.repair(str(CORRUPT))
    model = tmp_path / "tiny.json"
    model.write_text(json.dumps(TINY))
    common = ["--weights", "none", "--seed", "0", "--model", model, "--batch-size", "4", "--shard-size", "4"]
    common += ["--workers", "0"]
    whole = tmp_path / "whole.npz"
    code, _, err = run(capsys, "extract", "cub", folder.root, "-o", whole, *common)
    assert code == 0, err
    blocking = folder.image("22")  # position 21: shard 5; shards 0-4 finish first
    saved = blocking.read_bytes()
    blocking.unlink()
    os.mkfifo(blocking)
    out = tmp_path / "killed.npz"
    proc = subprocess.Popen(_cli("extract", "cub", folder.root, "-o", out, *common),
                            env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    parts = tmp_path / "killed.npz.parts"
    deadline = time.monotonic() + 240
    while not (parts / "shard-00004.npz").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert files_under(parts) == ["run.json"] + [f"shard-{k:05d}.npz" for k in range(5)]
    assert not out.exists()
    blocking.unlink()
    blocking.write_bytes(saved)
    code, text, err = run(capsys, "extract", "cub", folder.root, "-o", out, *common)
    assert code == 0, err
    assert "resumed: 5 finished shards" in text
    assert features(out)[0] == features(whole)[0]
    assert features(out)[1].tobytes() == features(whole)[1].tobytes()


def _meta_layout(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Meta's original DINOv2 naming, written out here independently of the loader's renaming."""
    out = {
        "cls_token": state["embeddings.cls_token"],
        "mask_token": state["embeddings.mask_token"],
        "pos_embed": state["embeddings.position_embeddings"],
        "patch_embed.proj.weight": state["embeddings.patch_embeddings.projection.weight"],
        "patch_embed.proj.bias": state["embeddings.patch_embeddings.projection.bias"],
        "norm.weight": state["layernorm.weight"],
        "norm.bias": state["layernorm.bias"],
    }
    for i in range(TINY["num_hidden_layers"]):
        hf, meta = f"encoder.layer.{i}.", f"blocks.{i}."
        for what in ("weight", "bias"):
            out[meta + f"attn.qkv.{what}"] = torch.cat(
                [state[hf + f"attention.{p}_proj.{what}"] for p in "qkv"], dim=0
            )
            out[meta + f"attn.proj.{what}"] = state[hf + f"attention.o_proj.{what}"]
            for name in ("norm1", "norm2", "mlp.fc1", "mlp.fc2"):
                out[meta + f"{name}.{what}"] = state[hf + f"{name}.{what}"]
        out[meta + "ls1.gamma"] = state[hf + "layer_scale1.lambda1"]
        out[meta + "ls2.gamma"] = state[hf + "layer_scale2.lambda1"]
    return out


def _legacy_layout(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The names older transformers releases (and the facebook/dinov2-* files) use, under `dinov2.`."""
    renames = {"attention.q_proj": "attention.attention.query", "attention.k_proj": "attention.attention.key",
               "attention.v_proj": "attention.attention.value", "attention.o_proj": "attention.output.dense"}  # fmt: skip
    out = {}
    for key, value in state.items():
        for new, old in renames.items():
            key = key.replace(new, old)
        out["dinov2." + key] = value
    out["classifier.weight"] = torch.zeros(5, 64)  # a head beside the backbone is ignored
    return out


def test_saved_random_weights_reproduce_the_random_features(capsys, cub_images, tiny_model, tmp_path):
    assert extract(capsys, cub_images, tmp_path / "random.npz", model=tiny_model, seed=3)[0] == 0
    reference = features(tmp_path / "random.npz")
    torch.manual_seed(3)
    model = Dinov2Model(Dinov2Config(**{**TINY, "image_size": 518, "layer_norm_eps": 1e-6}))
    state = {k: v.clone() for k, v in model.state_dict().items()}
    torch.save(state, tmp_path / "w.pth")
    save_file(state, str(tmp_path / "w.safetensors"))
    torch.save(
        {"teacher": {"backbone." + k: v for k, v in _meta_layout(state).items()}}, tmp_path / "meta.pth"
    )
    torch.save(_legacy_layout(state), tmp_path / "legacy.pth")
    model.save_pretrained(tmp_path / "hf")
    for weights in ("w.pth", "w.safetensors", "meta.pth", "legacy.pth", "hf"):
        out = tmp_path / f"from-{weights}.npz"
        model_flag = [] if weights == "hf" else ["--model", tiny_model]  # a folder says what it holds
        code, text, err = run(
            capsys, "extract", "cub", cub_images.root, "-o", out, "--weights", tmp_path / weights, *model_flag,
            "--batch-size", "4", "--shard-size", "8", "--workers", "0",
        )  # fmt: skip
        assert code == 0, (weights, err)
        assert "RANDOM" not in text
        got = features(out)
        assert got[0] == reference[0]
        np.testing.assert_array_equal(got[1], reference[1], err_msg=weights)
        manifest = json.loads(out.with_name(out.stem + ".manifest.json").read_text())
        assert manifest["weights"]["pretrained"] and len(manifest["weights"]["sha256"]) == 64


def _snapshot(base: Path) -> list[str]:
    return files_under(base)


@pytest.mark.parametrize(
    ("case", "needle"),
    [
        ("no folder", "not a directory"),
        ("no images.txt", "images.txt: missing"),
        ("no weights file", "the weights file does not exist"),
        ("no seed", "random weights need a seed"),
        ("unknown model", "unknown model 'vitz14'"),
        ("output exists", "pass --overwrite"),
        ("not npz", "must be an .npz file"),
        ("shard size", "not a multiple of --batch-size"),
        ("missing image, stop", "does not exist"),
        (
            "wrong architecture",
            "the weights are a DINOv2 of hidden size 32, 2 layers, but the model is DINOv2 ViT-S/14",
        ),
        ("folder for another model", "the folder holds a DINOv2 of hidden size 32"),
        ("not a state dict", "does not hold a state dict"),
        ("incomplete folder", "the weights lack or misshape 1 tensors"),
        ("meta with registers", "unexpected tensors: register_tokens"),
    ],
)
def test_bad_input_is_one_clear_error_and_creates_nothing(
    capsys, cub_images, tiny_model, tmp_path, case, needle
):
    out = tmp_path / "out.npz"
    root = cub_images.root
    weights = ["--weights", "none", "--seed", "0"]
    model = ["--model", str(tiny_model)]
    extra: list = []
    if case == "no folder":
        root = tmp_path / "nowhere"
    elif case == "no images.txt":
        (root / "images.txt").unlink()
    elif case == "no weights file":
        weights = ["--weights", str(tmp_path / "dinov2.pth")]
    elif case == "no seed":
        weights = ["--weights", "none"]
    elif case == "unknown model":
        model = ["--model", "vitz14"]
    elif case == "output exists":
        out.write_bytes(b"keep me")
    elif case == "not npz":
        out = tmp_path / "out.parquet"
    elif case == "shard size":
        extra = ["--shard-size", "6"]
    elif case == "missing image, stop":
        cub_images.image("3").unlink()
        extra = ["--on-error", "stop"]
    elif case in ("wrong architecture", "folder for another model", "not a state dict", "incomplete folder",
                  "meta with registers"):  # fmt: skip
        torch.manual_seed(0)
        small = Dinov2Model(Dinov2Config(**TINY))
        if case == "wrong architecture":
            torch.save(small.state_dict(), tmp_path / "small.pth")
            weights, model = ["--weights", str(tmp_path / "small.pth")], ["--model", "vits14"]
        elif case == "folder for another model":
            small.save_pretrained(tmp_path / "hf")
            weights, model = ["--weights", str(tmp_path / "hf")], ["--model", "vitb14"]
        elif case == "incomplete folder":
            small.save_pretrained(tmp_path / "hf")
            state = load_file(str(tmp_path / "hf" / "model.safetensors"))
            del state["layernorm.weight"]
            save_file(state, str(tmp_path / "hf" / "model.safetensors"))
            weights, model = ["--weights", str(tmp_path / "hf")], []
        elif case == "meta with registers":
            meta = _meta_layout(small.state_dict())
            torch.save({**meta, "register_tokens": torch.zeros(1, 4, 32)}, tmp_path / "reg.pth")
            weights = ["--weights", str(tmp_path / "reg.pth")]
        else:
            torch.save([1, 2, 3], tmp_path / "list.pth")
            weights = ["--weights", str(tmp_path / "list.pth")]
    before = _snapshot(tmp_path)
    code, text, err = run(
        capsys, "extract", "cub", root, "-o", out, *weights, *model, "--workers", "0", *extra
    )
    assert code == 2, (text, err)
    assert needle in err and "Traceback" not in err
    assert _snapshot(tmp_path) == before


def test_stop_on_error_names_the_file_and_keeps_finished_shards(capsys, cub_images, tiny_model, tmp_path):
    out = tmp_path / "f.npz"
    code, _, err = extract(capsys, cub_images, out, "--on-error", "stop", model=tiny_model)
    assert code == 2 and cub_images.paths[CORRUPT - 1] in err and "truncated" in err.lower()
    assert not out.exists()
    assert files_under(tmp_path / "f.npz.parts") == ["run.json"]  # image 7 is in the first shard
    cub_images.repair(str(CORRUPT))
    code, _, err = extract(capsys, cub_images, out, "--on-error", "stop", model=tiny_model)
    assert code == 0, err
    assert features(out)[0] == cub_images.ids


def test_other_settings_do_not_resume_someone_elses_shards(capsys, cub_images, tiny_model, tmp_path):
    out = tmp_path / "f.npz"
    assert extract(capsys, cub_images, out, "--stop-after", "1", model=tiny_model)[0] == 0
    code, _, err = extract(capsys, cub_images, out, model=tiny_model, seed=5)
    assert code == 2 and "other settings" in err and "weights" in err


def test_the_features_import_with_import_cub(capsys, cub_images, tiny_model, tmp_path):
    home = tmp_path / "home"
    partial = tmp_path / "partial.npz"
    assert extract(capsys, cub_images, partial, model=tiny_model)[0] == 0
    code, _, err = run(capsys, "--home", home, "import", "cub", cub_images.root, partial, cub_images.taxonomy)
    assert code == 2 and f"no features for image '{CORRUPT}'" in err
    cub_images.repair(str(CORRUPT))
    full = tmp_path / "full.npz"
    assert extract(capsys, cub_images, full, model=tiny_model)[0] == 0
    code, text, err = run(capsys, "--home", home, "import", "cub", cub_images.root, full, cub_images.taxonomy)
    assert code == 0, err
    assert f"imported cub: {N_IMAGES} samples x 32-D" in text and "3/2/2 Class/Genus/Family" in text
    # The dataset keeps what made its features (the weights' hash among it): the report's provenance reads it.
    from hierconsole.study.db.storage import Store

    with np.load(full, allow_pickle=False) as z:
        manifest = json.loads(str(z["manifest"]))
    with Store(home, read_only=True) as store:
        params = json.loads(store.one("SELECT params FROM datasets")[0])
    assert params["extraction"]["weights"] == manifest["weights"]
    assert params["extraction"]["images_sha256"] == manifest["images_sha256"]
    assert params["extraction"]["model"]["name"] == manifest["model"]["name"]


def test_any_folder_by_list_or_by_walking_it(capsys, cub_images, tiny_model, tmp_path):
    images = cub_images.root / "images"
    listing = tmp_path / "ids.csv"
    chosen = [2, 5, 9]
    listing.write_text("id,path\n" + "".join(f"img-{k},{cub_images.paths[k - 1]}\n" for k in chosen))
    common = ["--weights", "none", "--seed", "0", "--model", tiny_model, "--workers", "0"]
    code, _, err = run(
        capsys, "extract", "folder", images, "--list", listing, "-o", tmp_path / "l.npz", *common
    )
    assert code == 0, err
    assert features(tmp_path / "l.npz")[0] == [f"img-{k}" for k in chosen]
    code, _, err = run(capsys, "extract", "folder", images, "-o", tmp_path / "w.npz", *common)
    assert code == 0, err
    ids, x = features(tmp_path / "w.npz")
    assert ids == sorted(p for p in cub_images.paths if p != cub_images.paths[CORRUPT - 1])
    by_id = dict(zip(ids, x, strict=True))
    listed = features(tmp_path / "l.npz")[1]
    for row, k in zip(listed, chosen, strict=True):  # the same image gives the same feature in any batch
        np.testing.assert_allclose(row, by_id[cub_images.paths[k - 1]], rtol=1e-5, atol=1e-6)


def test_nabirds_features_are_keyed_by_uuid_and_import(capsys, tmp_path, tiny_model):
    from PIL import Image

    root = tmp_path / "nabirds"
    classes = [("0", "Birds"), ("1", "Perching Birds"), ("2", "Waterfowl"), ("10", "Chickadees"),
               ("20", "Ducks"), ("100", "Black-capped Chickadee"), ("101", "Carolina Chickadee"),
               ("200", "Mallard (Male)"), ("201", "Mallard (Female/juvenile)")]  # fmt: skip
    edges = [
        ("1", "0"),
        ("2", "0"),
        ("10", "1"),
        ("20", "2"),
        ("100", "10"),
        ("101", "10"),
        ("200", "20"),
        ("201", "20"),
    ]
    rng = np.random.default_rng(0)
    ids, lines = [], {"images.txt": [], "image_class_labels.txt": [], "train_test_split.txt": []}
    for cid in ("100", "101", "200", "201"):
        for k in range(3):
            uid = str(uuid.UUID(int=int(rng.integers(1 << 62))))
            rel = f"{int(cid):04d}/{uid.replace('-', '')}.jpg"
            (root / "images" / rel).parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(rng.integers(0, 256, (50, 70, 3), dtype=np.uint8)).save(root / "images" / rel)
            ids.append(uid)
            lines["images.txt"].append(f"{uid} {rel}")
            lines["image_class_labels.txt"].append(f"{uid} {cid}")
            lines["train_test_split.txt"].append(f"{uid} {1 if k else 0}")
    lines["classes.txt"] = [f"{c} {n}" for c, n in classes]
    lines["hierarchy.txt"] = [f"{c} {p}" for c, p in edges]
    for name, rows in lines.items():
        (root / name).write_text("\n".join(rows) + "\n")
    out = tmp_path / "nabirds.npz"
    code, _, err = run(capsys, "extract", "nabirds", root, "-o", out, "--weights", "none", "--seed", "0",
                       "--model", tiny_model, "--workers", "0")  # fmt: skip
    assert code == 0, err
    assert features(out)[0] == ids
    code, text, err = run(capsys, "--home", tmp_path / "home", "import", "nabirds", root, out)
    assert code == 0, err
    assert "imported nabirds: 12 samples x 32-D" in text and "4/2/2 Leaf/Parent/Supergroup" in text


def test_a_folder_of_unreadable_images_writes_nothing(capsys, tmp_path, tiny_model):
    images = tmp_path / "pics"
    images.mkdir()
    for k in range(3):
        (images / f"{k}.jpg").write_text("not a picture")
    out = tmp_path / "f.npz"
    code, _, err = run(capsys, "extract", "folder", images, "-o", out, "--weights", "none", "--seed", "0",
                       "--model", tiny_model, "--workers", "0")  # fmt: skip
    assert code == 2 and "none of the 3 images could be read" in err and "0.jpg" in err
    assert not out.exists()


def test_the_rate_column_says_nothing_before_the_first_images():
    """As a user saw it: '- img/s' beside the bar while the backbone loaded, read as a rate of nothing."""
    from rich.progress import Progress

    from hierconsole.cli.extract import _Rate

    now = [0.0]
    column = _Rate()
    with Progress(column, get_time=lambda: now[0], disable=True) as progress:
        task_id = progress.add_task("extract", total=100)
        task = progress.tasks[0]
        assert column.render(task).plain == ""
        for _ in range(4):
            now[0] += 0.5
            progress.advance(task_id, 10)
        assert column.render(task).plain == "20.0 img/s"
