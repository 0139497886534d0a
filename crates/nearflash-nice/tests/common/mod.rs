//! Real ext4 images made by Debian's e2fsprogs (`mke2fs -t ext4 -d DIR`), and `debugfs` answers about them.

#![allow(dead_code)]

pub mod fw;

use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Image {
    pub dir: tempfile::TempDir,
    pub img: PathBuf,
    pub bytes: Vec<u8>,
    /// (path inside the file system, contents) of every regular file put in it.
    pub files: Vec<(String, Vec<u8>)>,
}

fn write(root: &Path, rel: &str, data: &[u8], files: &mut Vec<(String, Vec<u8>)>) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, data).unwrap();
    files.push((format!("/{rel}"), data.to_vec()));
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// An 8 MiB ext4 image with nested directories (depth 6), files of 0..~300 KiB, a 150-entry directory and a
/// sparse file whose 12 extents need an extent-tree block. `features` goes to `mke2fs -O` when non-empty.
pub fn make_image(features: &str) -> Image {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let mut files = Vec::new();
    write(&root, "hello.txt", b"hello, NICE\n", &mut files);
    write(&root, "empty", b"", &mut files);
    write(&root, "emb/vectors.bin", &pattern(1, 300_000), &mut files);
    write(&root, "a/b/c/d/e/f/deep.bin", &pattern(2, 9000), &mut files);
    for i in 0..150 {
        write(&root, &format!("many/file{i:03}.dat"), &pattern(10 + i, 100 + 37 * i as usize), &mut files);
    }
    // Sparse: 12 data runs separated by holes -> 12 extents, more than the 4 in the inode.
    let sparse = root.join("sparse.bin");
    {
        use std::io::{Seek, SeekFrom, Write};
        let mut f = std::fs::File::create(&sparse).unwrap();
        let mut content = vec![0u8; 24 * 8192];
        for i in 0..12u64 {
            let run = pattern(100 + i, 4096);
            f.seek(SeekFrom::Start(i * 2 * 8192)).unwrap();
            f.write_all(&run).unwrap();
            content[(i * 2 * 8192) as usize..(i * 2 * 8192) as usize + 4096].copy_from_slice(&run);
        }
        f.set_len(24 * 8192).unwrap();
        files.push(("/sparse.bin".into(), content));
    }
    let img = dir.path().join("fs.img");
    let mut cmd = Command::new("mke2fs");
    cmd.args(["-q", "-F", "-t", "ext4", "-b", "4096", "-E", "lazy_itable_init=0"]);
    if !features.is_empty() {
        cmd.args(["-O", features]);
    }
    cmd.arg("-d").arg(&root).arg(&img).arg("8M");
    let out = cmd.output().expect("mke2fs (Debian e2fsprogs) must be installed: scripts/env.sh installs it");
    assert!(out.status.success(), "mke2fs failed: {}", String::from_utf8_lossy(&out.stderr));
    let bytes = std::fs::read(&img).unwrap();
    Image { dir, img, bytes, files }
}

/// `debugfs -R CMD IMG` output.
pub fn debugfs(img: &Path, cmd: &str) -> String {
    let out = Command::new("debugfs").arg("-R").arg(cmd).arg(img).output().expect("debugfs must be installed");
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Inode number of `path` per `debugfs stat`.
pub fn debugfs_inode(img: &Path, path: &str) -> u32 {
    let s = debugfs(img, &format!("stat {path}"));
    let rest = s.split("Inode: ").nth(1).unwrap_or_else(|| panic!("no inode in {s:?}"));
    rest.split_whitespace().next().unwrap().parse().unwrap()
}

/// Data blocks of `path` per `debugfs blocks` (file order).
pub fn debugfs_blocks(img: &Path, path: &str) -> Vec<u64> {
    debugfs(img, &format!("blocks {path}")).split_whitespace().map(|b| b.parse().unwrap()).collect()
}

/// Data blocks of `path` in file order, from the EXTENTS section of `debugfs stat` (extent-tree blocks, shown as
/// "(ETBn):blk", are left out; unwritten extents are listed by debugfs and kept).
pub fn debugfs_data_blocks(img: &Path, path: &str) -> Vec<u64> {
    let s = debugfs(img, &format!("stat {path}"));
    let Some(ext) = s.split("EXTENTS:").nth(1) else { return Vec::new() };
    let mut out = Vec::new();
    for item in ext.split(|c: char| c == ',' || c.is_whitespace()).filter(|t| t.contains("):")) {
        if item.starts_with("(ETB") {
            continue;
        }
        let phys = item.split("):").nth(1).unwrap();
        let (a, b) = phys.split_once('-').unwrap_or((phys, phys));
        out.extend(a.parse::<u64>().unwrap()..=b.parse::<u64>().unwrap());
    }
    out
}
