//! Seeded input generators for the non-scan kernels (the paper's Phoenix / MineBench inputs are not public in a
//! usable form). Output is the logical content; pack it with [`crate::pages`] (`pack_lines` for text,
//! `pack_records` for the others). Blocks are generated in parallel, each from its own seed derived from
//! (seed, block index), so the bytes depend only on the arguments.
//!
//! * text: `\n`-terminated lines of 20..=120 bytes cut at word boundaries from a TPC-H grammar text pool
//!   (dbgen's sentence generator: "furiously regular deposits sleep carefully ..."), ASCII, no NUL.
//! * regression points: `[x, y]` u8 pairs, x uniform on 0..=255, y = round(0.75 x + 20 + e) clamped to
//!   0..=255, e uniform on [-16, 16].
//! * pixels: `[r, g, b]` of a `width x height` image: gradients (r along x, g along y, b along the diagonal)
//!   plus uniform noise of ±24, clamped.
//! * cluster points: `dim` i32 LE coordinates; `clusters` centres uniform on [0, 1000)^dim (Phoenix k-means'
//!   grid), each point a random centre plus uniform noise of ±60 per axis, clamped to [0, 999].
//! * labelled records (naive_bayes, scalparc): `attributes` u8 values then a u8 class; the class is uniform, each
//!   (class, attribute) has a centre uniform on 0..values, and a value is its centre plus uniform noise of
//!   ±values/4 (at least ±1), clamped to 0..values: classes overlap, so neither classifier is perfect.

use crate::error::{invalid, Result};
use crate::lineitem::generate::compact_text_pool;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use rayon::prelude::*;

/// Items generated per parallel block.
const BLOCK_ITEMS: usize = 1 << 16;
/// Line lengths of generated text (bytes, including the newline).
pub const TEXT_LINE_MIN: usize = 20;
pub const TEXT_LINE_MAX: usize = 120;
/// Grid of k-means coordinates (Phoenix's GRID_SIZE).
pub const KMEANS_GRID: i32 = 1000;

fn block_rng(seed: u64, block: usize) -> Xoshiro256PlusPlus {
    // distinct, well-mixed streams per block (splitmix-style odd multiplier)
    Xoshiro256PlusPlus::seed_from_u64(seed ^ (block as u64).wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// Generates `n` items of `item_bytes` bytes in parallel blocks; `fill(rng, first_item, out)` writes a block.
fn blocks(
    n: usize,
    item_bytes: usize,
    seed: u64,
    fill: impl Fn(&mut Xoshiro256PlusPlus, usize, &mut [u8]) + Sync,
) -> Vec<u8> {
    let mut out = vec![0u8; n * item_bytes];
    out.par_chunks_mut(BLOCK_ITEMS * item_bytes).enumerate().for_each(|(b, chunk)| {
        fill(&mut block_rng(seed, b), b * BLOCK_ITEMS, chunk);
    });
    out
}

/// About `bytes` of text (whole lines; the last line ends at or after `bytes`).
pub fn text(bytes: usize, seed: u64) -> Vec<u8> {
    let pool = compact_text_pool();
    let pool = pool.text(0, pool.size()).as_bytes();
    const BLOCK_BYTES: usize = 1 << 16;
    let nblocks = bytes.div_ceil(BLOCK_BYTES);
    let parts: Vec<Vec<u8>> = (0..nblocks)
        .into_par_iter()
        .map(|b| {
            let want = BLOCK_BYTES.min(bytes - b * BLOCK_BYTES);
            let mut rng = block_rng(seed, b);
            let mut out = Vec::with_capacity(want + TEXT_LINE_MAX);
            while out.len() < want {
                let mut start = rng.gen_range(0..pool.len() - 2 * TEXT_LINE_MAX);
                while pool[start] != b' ' {
                    start += 1;
                }
                start += 1;
                let len = rng.gen_range(TEXT_LINE_MIN..=TEXT_LINE_MAX) - 1;
                // cut back to the last space so words stay whole
                let end = pool[start..start + len].iter().rposition(|&c| c == b' ').map_or(start + len, |i| start + i);
                out.extend_from_slice(&pool[start..end]);
                out.push(b'\n');
            }
            out
        })
        .collect();
    parts.concat()
}

/// `n` regression points `[x, y]`.
pub fn regression_points(n: usize, seed: u64) -> Vec<u8> {
    blocks(n, 2, seed, |rng, _, out| {
        for p in out.chunks_exact_mut(2) {
            let x: u8 = rng.gen();
            let e: f64 = rng.gen_range(-16.0..=16.0);
            p[0] = x;
            p[1] = (0.75 * f64::from(x) + 20.0 + e).round().clamp(0.0, 255.0) as u8;
        }
    })
}

/// A `width x height` RGB image, row-major `[r, g, b]` pixels.
pub fn pixels(width: usize, height: usize, seed: u64) -> Result<Vec<u8>> {
    if width == 0 || height == 0 {
        return Err(invalid(format!("image of {width} x {height} pixels")));
    }
    Ok(blocks(width * height, 3, seed, |rng, first, out| {
        for (i, px) in out.chunks_exact_mut(3).enumerate() {
            let (x, y) = ((first + i) % width, (first + i) / width);
            let base = [x * 255 / width, y * 255 / height, (x + y) * 255 / (width + height)];
            for (c, b) in px.iter_mut().zip(base) {
                *c = (b as i32 + rng.gen_range(-24..=24)).clamp(0, 255) as u8;
            }
        }
    }))
}

/// `n` points of `dim` i32 coordinates around `clusters` random centres.
pub fn cluster_points(n: usize, dim: usize, clusters: usize, seed: u64) -> Result<Vec<u8>> {
    if dim == 0 || dim > crate::kernel::kmeans::MAX_DIM || clusters == 0 {
        return Err(invalid(format!("cluster points need 1..=64 dimensions and clusters >= 1, got {dim}, {clusters}")));
    }
    let mut rng = block_rng(seed, usize::MAX);
    let centres: Vec<i32> = (0..clusters * dim).map(|_| rng.gen_range(0..KMEANS_GRID)).collect();
    Ok(blocks(n, 4 * dim, seed, |rng, _, out| {
        for p in out.chunks_exact_mut(4 * dim) {
            let c = rng.gen_range(0..clusters);
            for (d, v) in p.chunks_exact_mut(4).enumerate() {
                let x = (centres[c * dim + d] + rng.gen_range(-60..=60)).clamp(0, KMEANS_GRID - 1);
                v.copy_from_slice(&x.to_le_bytes());
            }
        }
    }))
}

/// `n` labelled records of `attributes` values in `0..values` and a class in `0..classes`.
pub fn labelled_records(n: usize, attributes: usize, classes: usize, values: usize, seed: u64) -> Result<Vec<u8>> {
    use crate::kernel::labelled::{MAX_ATTRIBUTES, MAX_CLASSES};
    if !(1..=MAX_ATTRIBUTES).contains(&attributes) || !(2..=MAX_CLASSES).contains(&classes) || !(1..=256).contains(&values)
    {
        return Err(invalid(format!(
            "labelled records need 1..={MAX_ATTRIBUTES} attributes, 2..={MAX_CLASSES} classes and 1..=256 values, got \
             {attributes}, {classes}, {values}"
        )));
    }
    let mut rng = block_rng(seed, usize::MAX);
    let centres: Vec<i32> = (0..classes * attributes).map(|_| rng.gen_range(0..values as i32)).collect();
    let spread = (values as i32 / 4).max(1);
    Ok(blocks(n, attributes + 1, seed, |rng, _, out| {
        for rec in out.chunks_exact_mut(attributes + 1) {
            let c = rng.gen_range(0..classes);
            for (a, v) in rec[..attributes].iter_mut().enumerate() {
                *v = (centres[c * attributes + a] + rng.gen_range(-spread..=spread)).clamp(0, values as i32 - 1) as u8;
            }
            rec[attributes] = c as u8;
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_whole_short_lines_and_deterministic() {
        let t = text(200_000, 7);
        assert!(t.len() >= 200_000 && t.len() < 200_000 + 4 * TEXT_LINE_MAX);
        assert_eq!(t, text(200_000, 7));
        assert_ne!(t, text(200_000, 8));
        assert!(t.ends_with(b"\n") && !t.contains(&0));
        for line in t.split(|&c| c == b'\n').filter(|l| !l.is_empty()) {
            assert!(line.len() < TEXT_LINE_MAX, "line of {}", line.len());
            assert!(line.is_ascii());
        }
    }

    #[test]
    fn points_follow_the_documented_line() {
        let p = regression_points(100_000, 1);
        assert_eq!(p, regression_points(100_000, 1));
        for xy in p.chunks_exact(2) {
            let expect = 0.75 * f64::from(xy[0]) + 20.0;
            assert!((f64::from(xy[1]) - expect).abs() <= 16.5 || xy[1] == 255);
        }
    }

    #[test]
    fn pixels_and_cluster_points_have_their_shapes() {
        assert_eq!(pixels(640, 480, 3).unwrap().len(), 640 * 480 * 3);
        assert!(pixels(0, 4, 3).is_err());
        let pts = cluster_points(1000, 3, 4, 9).unwrap();
        assert_eq!(pts.len(), 1000 * 12);
        for v in pts.chunks_exact(4) {
            assert!((0..KMEANS_GRID).contains(&i32::from_le_bytes([v[0], v[1], v[2], v[3]])));
        }
        assert!(cluster_points(10, 0, 4, 9).is_err());
    }

    #[test]
    fn labelled_records_stay_in_range() {
        let r = labelled_records(10_000, 5, 3, 16, 4).unwrap();
        assert_eq!(r.len(), 60_000);
        assert_eq!(r, labelled_records(10_000, 5, 3, 16, 4).unwrap());
        for rec in r.chunks_exact(6) {
            assert!(rec[..5].iter().all(|&v| v < 16) && rec[5] < 3);
        }
        assert!(labelled_records(1, 0, 2, 16, 1).is_err());
        assert!(labelled_records(1, 2, 1, 16, 1).is_err());
        assert!(labelled_records(1, 2, 2, 257, 1).is_err());
    }
}
