"""A folder of images as a vision model's input: loading, normalisation, probing, errors."""

import json

import numpy as np
import pytest
import torch

from rankcollapse.cli import main
from rankcollapse.errors import InputError
from rankcollapse.hf import wrap_model
from rankcollapse.hf.images import image_normalisation, load_images
from rankcollapse.hf.models import tiny_model
from rankcollapse.measure import probe


@pytest.fixture
def images(tmp_path):
    """Three small images of different sizes and modes (RGB PNG, greyscale PNG, RGB JPEG)."""
    from PIL import Image

    folder = tmp_path / "images"
    folder.mkdir()
    rng = np.random.default_rng(0)
    Image.fromarray((rng.random((20, 30, 3)) * 255).astype("uint8")).save(folder / "a.png")
    Image.fromarray((rng.random((12, 12)) * 255).astype("uint8")).save(folder / "b.png")
    Image.fromarray((rng.random((40, 10, 3)) * 255).astype("uint8")).save(folder / "c.jpg")
    (folder / "notes.txt").write_text("not an image")
    return folder


def test_images_match_the_library_vit_image_processor(images):
    from PIL import Image
    from transformers import ViTImageProcessorPil

    ours = load_images(images, size=16)
    files = sorted(p for p in images.iterdir() if p.suffix != ".txt")
    processor = ViTImageProcessorPil(size={"height": 16, "width": 16})
    rgb = []
    for f in files:
        with Image.open(f) as image:
            rgb.append(image.convert("RGB"))
    theirs = processor(images=rgb, return_tensors="pt").pixel_values
    assert ours.shape == (3, 3, 16, 16)
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-6)


def test_preprocessor_config_sets_mean_std_and_scale(tmp_path, images):
    config = {"image_mean": [0.485, 0.456, 0.406], "image_std": [0.229, 0.224, 0.225]}
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(config))
    norm = image_normalisation(tmp_path, channels=3)
    assert norm.mean == (0.485, 0.456, 0.406) and norm.std == (0.229, 0.224, 0.225)
    raw = load_images(images, size=8, norm=image_normalisation(tmp_path / "none", channels=3))
    imagenet = load_images(images, size=8, norm=norm)
    pixel = (raw * 0.5 + 0.5 - torch.tensor(norm.mean)[:, None, None]) / torch.tensor(norm.std)[
        :, None, None
    ]  # the same raw pixel in [0, 1], normalised the other way
    torch.testing.assert_close(imagenet, pixel)


def test_broken_preprocessor_config_is_named(tmp_path):
    (tmp_path / "preprocessor_config.json").write_text("{not json")
    with pytest.raises(InputError, match="preprocessor_config.json.*not a readable JSON"):
        image_normalisation(tmp_path, channels=3)
    (tmp_path / "preprocessor_config.json").write_text('{"image_mean": [0.5, 0.5]}')
    with pytest.raises(InputError, match="image_mean.*2 channels but the model has 3"):
        image_normalisation(tmp_path, channels=3)


def test_missing_folder_empty_folder_and_unreadable_image_fail_clearly(tmp_path, images):
    with pytest.raises(InputError, match="image folder .*nowhere.* does not exist"):
        load_images(tmp_path / "nowhere", size=8)
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "readme.txt").write_text("x")
    with pytest.raises(InputError, match="holds no .png, .jpg, .jpeg files .found: readme.txt"):
        load_images(empty, size=8)
    (images / "broken.png").write_bytes(b"not a png at all")
    with pytest.raises(InputError, match="image 'broken.png' in .* cannot be read"):
        load_images(images, size=8)


def test_probe_of_a_vision_model_measures_each_image_of_the_folder(images):
    model = wrap_model(tiny_model("vit"), name="tiny-vit")
    frame = probe(model, images=images, metrics=["res_comp_rel"])
    assert sorted(frame["sample"].unique()) == [0, 1, 2]  # three images, fewer than n_samples
    assert sorted(frame["layer"].unique()) == [0, 1, 2]
    first_two = probe(model, images=images, n_samples=2, batch_size=1, metrics=["res_comp_rel"])
    keys = ["sample", "layer"]
    both = frame[frame["sample"] < 2].sort_values(keys)["value"].to_numpy()
    np.testing.assert_allclose(first_two.sort_values(keys)["value"].to_numpy(), both, rtol=1e-6)


def test_images_to_a_text_model_and_text_to_a_vision_model_are_refused(images):
    bert = wrap_model(tiny_model("bert"), name="tiny-bert")
    with pytest.raises(InputError, match="'tiny-bert' takes text, not images"):
        probe(bert, images=images)
    vit = wrap_model(tiny_model("vit"), name="tiny-vit")
    with pytest.raises(InputError, match="'tiny-vit' .vit. takes images, not text.*--images"):
        probe(vit, text="some words to read")


def test_probe_cli_reads_images_with_the_model_directory_preprocessor_config(
    tmp_path, images, capsys
):
    import pandas as pd

    model = tiny_model("vit")
    folder = tmp_path / "vit"
    model.save_pretrained(folder)
    (folder / "preprocessor_config.json").write_text('{"image_mean": 0.4, "image_std": 0.3}')
    argv = ["probe", str(folder), "--images", str(images), "--metrics", "res_comp_rel",
            "--out", str(tmp_path / "out")]  # fmt: skip
    assert main(argv) == 0
    keys = ["sample", "layer"]
    cli = pd.read_csv(tmp_path / "out" / "results.csv").sort_values(keys)["value"].to_numpy()
    from_dir = probe(str(folder), images=images, metrics=["res_comp_rel"]).sort_values(keys)
    defaults = probe(wrap_model(model), images=images, metrics=["res_comp_rel"]).sort_values(keys)
    np.testing.assert_allclose(cli, from_dir["value"].to_numpy(), rtol=1e-9)
    assert np.abs(cli - defaults["value"].to_numpy()).max() > 1e-3  # mean 0.4, std 0.3 were used
    tiny_model("bert").save_pretrained(tmp_path / "bert")
    assert main(["probe", str(tmp_path / "bert"), "--images", str(images)]) == 2
    assert "takes text, not images" in capsys.readouterr().err


@pytest.mark.parametrize(("width", "height", "message"), [
    (8_000, 7_000, r"'bomb.png' is 8000 x 7000 pixels, more than 50,000,000"),
    (14_000, 14_000, r"'bomb.png' in .* is too large to decode safely"),  # PIL's own limit
])  # fmt: skip
def test_a_decompression_bomb_is_refused_before_it_is_decoded(tmp_path, width, height, message):
    from PIL import Image

    folder = tmp_path / "bombs"
    folder.mkdir()
    Image.new("1", (width, height)).save(folder / "bomb.png")  # kilobytes on disk
    assert (folder / "bomb.png").stat().st_size < 100_000
    with pytest.raises(InputError, match=message):
        load_images(folder, size=8)
