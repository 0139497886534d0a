//! Fashion-MNIST in the IDX format (gzip-compressed, as Debian's `dataset-fashion-mnist` ships it): train images form
//! the retrieval database, test images are the queries, labels judge precision@T.

use crate::error::{CognitiveError, Result};
use std::io::Read;
use std::path::{Path, PathBuf};

/// Where Debian's package installs the files.
pub const DEBIAN_DIR: &str = "/usr/share/datasets/fashion-mnist";
/// Image side in pixels.
pub const SIDE: usize = 28;
/// Pixels per image.
pub const PIXELS: usize = SIDE * SIDE;
/// Classes (T-shirt/top .. ankle boot).
pub const CLASSES: usize = 10;

/// Images (row-major, one byte per pixel) with their labels.
#[derive(Debug, Clone, PartialEq)]
pub struct Split {
    pub images: Vec<u8>,
    pub labels: Vec<u8>,
}

impl Split {
    pub fn len(&self) -> usize {
        self.labels.len()
    }
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }
    pub fn image(&self, i: usize) -> &[u8] {
        &self.images[i * PIXELS..(i + 1) * PIXELS]
    }
    /// The first `n` items (all if fewer).
    pub fn head(&self, n: usize) -> Split {
        let n = n.min(self.len());
        Split { images: self.images[..n * PIXELS].to_vec(), labels: self.labels[..n].to_vec() }
    }
}

fn read_gz(path: &Path) -> Result<Vec<u8>> {
    let f = std::fs::File::open(path).map_err(|e| CognitiveError::Io { path: path.display().to_string(), source: e })?;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(f)
        .read_to_end(&mut out)
        .map_err(|e| CognitiveError::bad_file(path.display().to_string(), format!("not a readable gzip file: {e}")))?;
    Ok(out)
}

fn be_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Parses an IDX file's bytes: magic 0x0000_08DD (unsigned bytes, DD dimensions), dimensions, then the data.
/// Returns (dimensions, data).
pub fn parse_idx(name: &str, bytes: &[u8]) -> Result<(Vec<usize>, Vec<u8>)> {
    let bad = |why: String| CognitiveError::bad_file(name, why);
    if bytes.len() < 4 {
        return Err(bad(format!("{} bytes, shorter than the 4-byte IDX magic", bytes.len())));
    }
    if bytes[0] != 0 || bytes[1] != 0 || bytes[2] != 0x08 {
        return Err(bad(format!("magic {:02x?} is not an unsigned-byte IDX file (00 00 08 nn)", &bytes[..4])));
    }
    let ndim = bytes[3] as usize;
    if ndim == 0 || ndim > 4 {
        return Err(bad(format!("{ndim} dimensions; 1 to 4 allowed")));
    }
    let header = 4 + 4 * ndim;
    if bytes.len() < header {
        return Err(bad(format!("truncated header: {} bytes, {header} needed", bytes.len())));
    }
    let dims: Vec<usize> = (0..ndim).map(|i| be_u32(bytes, 4 + 4 * i) as usize).collect();
    let count = dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or_else(|| bad("dimensions overflow".into()))?;
    if bytes.len() - header != count {
        return Err(bad(format!("{} data bytes, dimensions {dims:?} need {count}", bytes.len() - header)));
    }
    Ok((dims, bytes[header..].to_vec()))
}

/// Parses an image file and a label file into a split, checking that they agree.
pub fn parse_split(images_name: &str, images: &[u8], labels_name: &str, labels: &[u8]) -> Result<Split> {
    let (idims, ibytes) = parse_idx(images_name, images)?;
    let (ldims, lbytes) = parse_idx(labels_name, labels)?;
    if idims.len() != 3 || idims[1] != SIDE || idims[2] != SIDE {
        return Err(CognitiveError::bad_file(images_name, format!("dimensions {idims:?}; expected [n, 28, 28]")));
    }
    if ldims.len() != 1 || ldims[0] != idims[0] {
        return Err(CognitiveError::bad_file(labels_name, format!("dimensions {ldims:?}; expected [{}]", idims[0])));
    }
    if let Some(&l) = lbytes.iter().find(|&&l| l as usize >= CLASSES) {
        return Err(CognitiveError::bad_file(labels_name, format!("label {l}; labels are 0..{CLASSES}")));
    }
    Ok(Split { images: ibytes, labels: lbytes })
}

/// Which half of the data set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// 60000 training images: the database.
    Train,
    /// 10000 test images: the queries.
    Test,
}

fn file_names(part: Part) -> (&'static str, &'static str) {
    match part {
        Part::Train => ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
        Part::Test => ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
    }
}

/// The data directory: `NEARFLASH_FASHION_MNIST` if set, else Debian's.
pub fn default_dir() -> PathBuf {
    std::env::var_os("NEARFLASH_FASHION_MNIST").map_or_else(|| PathBuf::from(DEBIAN_DIR), PathBuf::from)
}

/// Loads one part from `dir`.
pub fn load(dir: &Path, part: Part) -> Result<Split> {
    let (i, l) = file_names(part);
    let (ip, lp) = (dir.join(i), dir.join(l));
    let (ib, lb) = (read_gz(&ip)?, read_gz(&lp)?);
    parse_split(&ip.display().to_string(), &ib, &lp.display().to_string(), &lb)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idx(dims: &[u32], data: &[u8]) -> Vec<u8> {
        let mut v = vec![0, 0, 8, dims.len() as u8];
        dims.iter().for_each(|d| v.extend_from_slice(&d.to_be_bytes()));
        v.extend_from_slice(data);
        v
    }

    #[test]
    fn parses_and_rejects() {
        let imgs = idx(&[2, 28, 28], &[7; 2 * PIXELS]);
        let labs = idx(&[2], &[3, 9]);
        let s = parse_split("i", &imgs, "l", &labs).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s.image(1)[0], 7);
        assert!(parse_split("i", &imgs[..imgs.len() - 1], "l", &labs).is_err());
        assert!(parse_split("i", &imgs, "l", &idx(&[2], &[3, 10])).is_err());
        assert!(parse_split("i", &imgs, "l", &idx(&[3], &[1, 2, 3])).is_err());
        assert!(parse_idx("x", &[0, 0, 9, 1, 0, 0, 0, 0]).is_err());
        assert!(parse_idx("x", &[0, 0, 8]).is_err());
        assert!(parse_idx("x", &[0, 0, 8, 2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]).is_err());
        assert!(parse_split("i", &idx(&[1, 27, 28], &[0; 27 * 28]), "l", &idx(&[1], &[0])).is_err());
    }

    #[test]
    fn loads_debian_files_when_installed() {
        let dir = default_dir();
        if !dir.join("t10k-images-idx3-ubyte.gz").exists() {
            return; // dataset-fashion-mnist not installed: the parser is covered above
        }
        let t = load(&dir, Part::Test).unwrap();
        assert_eq!(t.len(), 10_000);
        assert!(t.labels.iter().all(|&l| l < 10));
    }
}
