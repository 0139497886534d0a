"""GIST descriptors (Oliva and Torralba, IJCV 2001) and the two classic hashing methods the paper's Fig. 8 compares
deep hashing with: LSH (random hyperplanes, Charikar 2002) and ITQ (iterative quantization, Gong and Lazebnik,
CVPR 2011), on GIST features as in the paper ("512-dimensional GIST feature").

GIST here follows the usual settings: the image (log intensities, padded by reflection) is prefiltered (whitened by
a Gaussian high-pass, then divided by its local contrast), filtered by a bank of Gabor-like filters in the frequency
domain (4 scales x 8 orientations), and each filter's magnitude response is averaged over a 4 x 4 grid: 32 x 16 =
512 numbers per image. Images are padded from 28 x 28 to 32 x 32 (a power of two for the FFTs).
"""

from __future__ import annotations

import numpy as np

SCALES, ORIENTATIONS, GRID = 4, 8, 4
#: Side the images are padded to before filtering, and the prefilter's cut-off (cycles per image).
SIDE, PREFILTER_FC, PAD = 32, 4.0, 5


def _frequencies(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Radial frequency and angle of each FFT bin (unshifted layout) of an n x n image."""
    f = np.fft.fftfreq(n) * n
    fx, fy = np.meshgrid(f, f)
    return np.hypot(fx, fy), np.arctan2(fy, fx)


def gabor_bank(n: int = SIDE) -> np.ndarray:
    """The filters' transfer functions, (SCALES * ORIENTATIONS, n, n): Gaussians in log-polar frequency, one per
    scale (centre 0.3 / 1.85^s of the sampling rate, an octave apart) and orientation (pi / 8 apart)."""
    fr, theta = _frequencies(n)
    out = []
    for s in range(SCALES):
        centre = 0.3 / 1.85 ** s
        for o in range(ORIENTATIONS):
            d = theta + np.pi / ORIENTATIONS * o
            d = (d + np.pi) % (2 * np.pi) - np.pi  # angular distance to the filter's orientation, in [-pi, pi)
            width = 16 * ORIENTATIONS ** 2 / 32 ** 2
            out.append(np.exp(-10 * 0.35 * (fr / n / centre - 1) ** 2 - 2 * width * np.pi * d ** 2))
    return np.stack(out).astype(np.float32)


def _prefilter(img: np.ndarray) -> np.ndarray:
    """Whitening and local contrast normalisation of a batch (m, n, n) of log images."""
    n = img.shape[-1]
    fr, _ = _frequencies(n)
    s1 = PREFILTER_FC / np.sqrt(np.log(2))
    low = np.exp(-(fr ** 2) / s1 ** 2)
    out = img - np.real(np.fft.ifft2(np.fft.fft2(img) * low))
    local = np.sqrt(np.abs(np.fft.ifft2(np.fft.fft2(out ** 2) * low)))
    return out / (0.2 + local)


def gist(images: np.ndarray, side: int = 28, batch: int = 500) -> np.ndarray:
    """512-d GIST of uint8 images (m, side * side), float32 (m, 512)."""
    images = np.asarray(images)
    if images.ndim != 2 or images.shape[1] != side * side:
        raise ValueError(f"images: shape {images.shape}; (m, {side * side}) expected")
    bank = gabor_bank(SIDE)
    cell = SIDE // GRID
    out = np.empty((len(images), len(bank) * GRID * GRID), np.float32)
    lo = (SIDE - side) // 2
    hi = SIDE - side - lo
    for i in range(0, len(images), batch):
        x = np.log1p(images[i:i + batch].reshape(-1, side, side).astype(np.float64))
        x = np.pad(x, ((0, 0), (lo + PAD, hi + PAD), (lo + PAD, hi + PAD)), mode="symmetric")
        x = _prefilter(x)[:, PAD:PAD + SIDE, PAD:PAD + SIDE].astype(np.float32)
        resp = np.abs(np.fft.ifft2(np.fft.fft2(x)[:, None] * bank[None]))  # m, filters, SIDE, SIDE (complex64)
        cells = resp.reshape(len(x), len(bank), GRID, cell, GRID, cell).mean(axis=(3, 5))
        out[i:i + batch] = cells.reshape(len(x), -1)
    return out


def pack(bits: np.ndarray) -> np.ndarray:
    """Rows of 0/1 (m, b <= 64) as uint64 codes, bit j = column j."""
    b = bits.shape[1]
    if b > 64:
        raise ValueError(f"bits: {b} columns; at most 64")
    weights = np.left_shift(np.uint64(1), np.arange(b, dtype=np.uint64))
    return (bits.astype(np.uint64) * weights).sum(axis=1, dtype=np.uint64)


class Lsh:
    """Random-hyperplane LSH: bit j = sign of the j-th Gaussian projection of the centred feature."""

    def __init__(self, train: np.ndarray, bits: int, seed: int = 1) -> None:
        self.mean = train.mean(axis=0)
        self.planes = np.random.default_rng(seed).standard_normal((train.shape[1], bits))

    def codes(self, x: np.ndarray) -> np.ndarray:
        return pack((x - self.mean) @ self.planes >= 0)


class Itq:
    """Iterative quantization: PCA to `bits` dimensions, then the rotation that minimises the quantization error
    to the hypercube's vertices, alternating codes and rotation (an orthogonal Procrustes problem) `iterations`
    times from a random rotation."""

    def __init__(self, train: np.ndarray, bits: int, seed: int = 1, iterations: int = 50) -> None:
        self.mean = train.mean(axis=0)
        x = train - self.mean
        # the principal directions from the d x d covariance (its eigenvectors, largest first): one small
        # eigendecomposition instead of an SVD of the whole training matrix
        _, vectors = np.linalg.eigh(x.T @ x)
        self.pca = vectors[:, ::-1][:, :bits]
        v = x @ self.pca
        rotation, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((bits, bits)))
        for _ in range(iterations):
            b = np.where(v @ rotation >= 0, 1.0, -1.0)
            u, _, wt = np.linalg.svd(b.T @ v)
            rotation = (u @ wt).T
        self.rotation = rotation

    def codes(self, x: np.ndarray) -> np.ndarray:
        return pack((x - self.mean) @ self.pca @ self.rotation >= 0)
