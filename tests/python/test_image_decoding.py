"""The server's photo pipeline (server/imaging: decode, EXIF orientation, centre crop, bicubic resize) against the
client's (tools/classify.py's load_image, Pillow): `convoy image` writes the UINT8 pixels the server would make of a
photo for an H x W image input, and they must equal Pillow's.

Photos: scikit-image's samples (PNG, RGB and grayscale), the same saved by Pillow as JPEG (4:2:0 and 4:4:4), with an
EXIF orientation, with alpha, and as 16-bit PNG; several input sizes and crop fractions. Every pixel must be equal:
the resize is Pillow's fixed-point arithmetic, and JPEG decoding is libjpeg-turbo on both sides (accurate integer
IDCT, fancy upsampling). A tolerance above 0 here would be a difference a user could see in the top classes.
"""
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from conftest import built_binary

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "tools"))
import classify  # noqa: E402  (tools/classify.py: the client-side preparation)

PIL = pytest.importorskip("PIL")
from PIL import Image  # noqa: E402

skimage_data = pytest.importorskip("skimage.data")


@pytest.fixture(scope="module")
def cli():
    return built_binary("server/tools/convoy", "CONVOY_CLI")


def server_pixels(cli, path, height, width, crop_fraction, tmp_path):
    out = tmp_path / "pixels.npy"
    proc = subprocess.run([str(cli), "image", f"--image={path}", f"--height={height}", f"--width={width}",
                           f"--crop_fraction={crop_fraction}", f"--output={out}"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    pixels = np.load(out)
    assert pixels.dtype == np.uint8 and pixels.shape == (1, height, width, 3)
    return pixels[0]


def client_pixels(path, height, width, crop_fraction):
    return classify.load_image(str(path), height, width, crop_fraction)


def photo(name):
    return getattr(skimage_data, name)()


def save(tmp_path, array, name, **kwargs):
    path = tmp_path / name
    Image.fromarray(array).save(path, **kwargs)
    return path


PHOTOS = {
    # name: (how it is written, the largest per-pixel difference allowed)
    "chelsea.png": (lambda d: save(d, photo("chelsea"), "chelsea.png"), 0),
    "coffee_rgba.png": (lambda d: save(d, np.dstack([photo("coffee"), np.arange(400 * 600, dtype=np.uint32)
                                                     .reshape(400, 600).astype(np.uint8)]), "coffee_rgba.png"), 0),
    "camera_gray.png": (lambda d: save(d, photo("camera"), "camera_gray.png"), 0),
    "astronaut_16bit.png": (lambda d: _save_16bit(d, photo("astronaut")), 0),
    "chelsea_420.jpg": (lambda d: save(d, photo("chelsea"), "chelsea_420.jpg", quality=90, subsampling=2), 0),
    "coffee_444.jpg": (lambda d: save(d, photo("coffee"), "coffee_444.jpg", quality=95, subsampling=0), 0),
    "astronaut_rotated.jpg": (lambda d: _save_with_orientation(d, photo("astronaut"), 6), 0),
    "chelsea_mirrored.jpg": (lambda d: _save_with_orientation(d, photo("chelsea"), 4), 0),
}


def _save_16bit(tmp_path, rgb):
    path = tmp_path / "astronaut_16bit.png"
    import zlib
    # High bytes the photo, low bytes varying: a decoder must keep the high byte, as Pillow's convert("RGB") does.
    wide = (rgb.astype(np.uint32) * 256 + np.arange(rgb.size).reshape(rgb.shape) % 256).astype(">u2")
    raw = b"".join(b"\x00" + row.tobytes() for row in wide)
    height, width = rgb.shape[:2]

    def chunk(kind, data):
        return len(data).to_bytes(4, "big") + kind + data + zlib.crc32(kind + data).to_bytes(4, "big")
    ihdr = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([16, 2, 0, 0, 0])
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) +
                     chunk(b"IEND", b""))
    return path


def _save_with_orientation(tmp_path, rgb, orientation):
    exif = Image.Exif()
    exif[0x0112] = orientation
    path = tmp_path / f"oriented_{orientation}.jpg"
    Image.fromarray(rgb).save(path, quality=92, exif=exif)
    return path


@pytest.mark.parametrize("name", sorted(PHOTOS))
@pytest.mark.parametrize("height,width,crop_fraction", [(224, 224, 224 / 256), (96, 160, 1.0), (300, 200, 0.5)])
def test_server_pixels_equal_the_clients(cli, tmp_path, name, height, width, crop_fraction):
    write, tolerance = PHOTOS[name]
    path = write(tmp_path)
    expected = client_pixels(path, height, width, crop_fraction)
    actual = server_pixels(cli, path, height, width, crop_fraction, tmp_path)
    difference = np.abs(actual.astype(int) - expected.astype(int))
    assert difference.max() <= tolerance, (
        f"{name} -> {width}x{height}: max difference {difference.max()}, {np.count_nonzero(difference)} of "
        f"{difference.size} values differ")


@pytest.mark.parametrize("content,message", [
    (b"", "image is empty (0 bytes)"),
    (b"GIF89a\x01\x00\x01\x00", "neither JPEG (starts FF D8 FF) nor PNG"),
    (b"\xff\xd8\xff\xe0\x00\x10JFIF\x00", "JPEG image"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR", "PNG image cannot be read"),
])
def test_bad_photos_get_a_precise_error(cli, tmp_path, content, message):
    path = tmp_path / "bad.img"
    path.write_bytes(content)
    proc = subprocess.run([str(cli), "image", f"--image={path}", "--height=8", "--width=8",
                           f"--output={tmp_path / 'x.npy'}"], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr
