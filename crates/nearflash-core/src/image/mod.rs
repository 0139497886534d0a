//! The persistent device image: a directory on the host file system.
//!
//! ```text
//! <dir>/nearflash.toml   the device's resolved preset (every value with unit and source)
//! <dir>/state.json       format version, clean-shutdown flag, materialised-data flag
//! <dir>/l2p.bin          mapping table, u32 per logical sector (sparse, mmap'd)
//! <dir>/oob.bin          OOB record per physical page, each with a checksum (sparse, mmap'd)
//! <dir>/data.bin         sector data at physical addresses (sparse; holes punched on erase)
//! <dir>/checkpoint.bin   block table, sequence number and mapping digest of the last checkpoint, with a
//!                        checksum (replaced atomically)
//! <dir>/trim.log         deallocations since the last checkpoint, each record with a checksum
//! <dir>/ext/<name>.state saved state of extension <name> (length and checksum)
//! <dir>/LOCK             held (flock) while a process has the device open
//! ```
//! Every binary file starts with a `FileHeader` (magic, kind, format, geometry, length). A 512 GiB device opens
//! quickly and occupies only what was written. After a clean close the checkpoint is current (and the mapping
//! table must match its digest); after a crash (`kill -9`) the FTL replays the OOB area from the checkpoint on.
//! Anything missing, truncated or failing a checksum is refused with the file's name; `repair` (in `repair.rs`)
//! salvages what it can and says what it could not.

mod ext_state;
mod repair;

pub use crate::store::{geometry_fingerprint, BadTrim, DataStore, FileHeader, MappedRecords, MappedU32, TrimJournal, TrimRecord, FORMAT, HEADER_SPAN};
pub use repair::{RepairReport, Salvage};

use crate::config::{ConfigTree, DeviceConfig};
use crate::error::{Result, SimError};
use crate::ftl::{oob, BlockTable, Ftl, FtlStore};
use crate::nand::Geometry;
use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Files that mark a directory as (part of) a device image.
const IMAGE_FILES: [&str; 7] =
    ["state.json", "nearflash.toml", "l2p.bin", "oob.bin", "data.bin", "checkpoint.bin", "trim.log"];

/// How durable a completed Flush is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Survives the process being killed (data is in the host's page cache).
    #[default]
    Process,
    /// Survives a host crash too: Flush and checkpoints fsync the files.
    Fsync,
}

#[derive(Debug, Serialize, Deserialize)]
struct State {
    format: u32,
    clean: bool,
    materialised: bool,
}

/// How the image was found when opened.
pub enum Opened {
    /// Clean shutdown: the checkpoint is current.
    Clean(BlockTable, u64),
    /// Crash: the checkpoint (if any) must be rolled forward from the OOB area.
    Unclean(Option<(BlockTable, u64)>),
}

/// What `checkpoint.bin` holds.
pub struct Checkpoint {
    pub table: BlockTable,
    /// Next sequence number when it was taken.
    pub seq: u64,
    /// Digest of the mapping table (`MappedU32::digest`) when it was taken.
    pub l2p_digest: u64,
}

/// The headers of one device's files.
pub(crate) struct Headers {
    pub l2p: FileHeader,
    pub oob: FileHeader,
    pub data: FileHeader,
    pub ckpt: FileHeader,
    pub trim: FileHeader,
}

impl Headers {
    pub fn new(cfg: &DeviceConfig) -> Headers {
        let geo = Geometry::from_config(cfg);
        let g = geometry_fingerprint(&geo, cfg.logical_sectors());
        let spp = geo.sectors_per_page as usize;
        Headers {
            l2p: FileHeader { kind: "l2p", record: 4, count: cfg.logical_sectors(), geometry: g },
            oob: FileHeader { kind: "oob", record: oob::stride(spp) as u32, count: geo.pages(), geometry: g },
            data: FileHeader { kind: "data", record: geo.page_size, count: geo.pages(), geometry: g },
            ckpt: FileHeader { kind: "ckpt", record: 1, count: 0, geometry: g },
            trim: FileHeader { kind: "trim", record: 20, count: 0, geometry: g },
        }
    }
}

/// Whether `dir` holds any of a device image's files.
pub fn looks_like_image(dir: &Path) -> bool {
    IMAGE_FILES.iter().any(|f| dir.join(f).exists())
}

fn read_state(dir: &Path) -> Result<State> {
    let state_path = dir.join("state.json");
    let text = match fs::read_to_string(&state_path) {
        Ok(t) => t,
        Err(e) if !dir.exists() => {
            return Err(SimError::Image(format!("{} does not exist ({e}); create a device there first", dir.display())))
        }
        Err(e) if looks_like_image(dir) => {
            return Err(SimError::Image(format!(
                "state.json: cannot read it ({e}): {} is a damaged device image; see `nearflash repair`",
                dir.display()
            )))
        }
        Err(_) => return Err(SimError::Image(format!("{} is not a nearflash device (no state.json)", dir.display()))),
    };
    let state: State = serde_json::from_str(&text)
        .map_err(|e| SimError::Image(format!("state.json: {e} ({}); see `nearflash repair`", state_path.display())))?;
    if state.format != FORMAT {
        return Err(SimError::Image(format!(
            "{}: image format {}, expected {FORMAT} (made by another nearflash version; recreate it)",
            dir.display(),
            state.format
        )));
    }
    Ok(state)
}

fn read_tree(dir: &Path) -> Result<(ConfigTree, DeviceConfig)> {
    let p = dir.join("nearflash.toml");
    let at = p.display();
    let text = fs::read_to_string(&p)
        .map_err(|e| SimError::Image(format!("nearflash.toml: cannot read the configuration ({e}) ({at})")))?;
    let tree = ConfigTree::parse(&text, &crate::config::preset_text)
        .map_err(|e| SimError::Image(format!("nearflash.toml: {e} ({at})")))?;
    let cfg = DeviceConfig::from_tree(&tree)?;
    Ok((tree, cfg))
}

pub struct Image {
    dir: PathBuf,
    _lock: File,
    durability: Durability,
    materialised: bool,
    ckpt: FileHeader,
}

fn lock(dir: &Path) -> Result<File> {
    use std::os::fd::AsRawFd;
    let f = OpenOptions::new().create(true).truncate(false).write(true).open(dir.join("LOCK"))?;
    // SAFETY: flock on an open descriptor.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(SimError::Image(format!("{} is open in another process", dir.display())));
    }
    Ok(f)
}

fn write_atomic(path: &Path, bytes: &[u8], sync: bool) -> Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        if sync {
            f.sync_all()?;
        }
    }
    fs::rename(&tmp, path)?;
    Ok(())
}

impl Image {
    /// Creates a new image in `dir`, which must be missing or empty (a directory holding anything else is
    /// refused, so that a mistyped path never turns a user's folder into an image).
    pub fn create(
        dir: &Path,
        tree: &ConfigTree,
        materialise: bool,
        durability: Durability,
    ) -> Result<(Image, FtlStore)> {
        let cfg = DeviceConfig::from_tree(tree)?;
        if dir.exists() {
            if !dir.is_dir() {
                return Err(SimError::Image(format!("{} exists and is not a directory", dir.display())));
            }
            if dir.join("state.json").exists() {
                return Err(SimError::Image(format!("{} already holds a device; open it or remove it", dir.display())));
            }
            if fs::read_dir(dir)?.next().is_some() {
                let what = if looks_like_image(dir) {
                    "holds a damaged device image without state.json (see `nearflash repair`)"
                } else {
                    "is not empty"
                };
                let at = dir.display();
                return Err(SimError::Image(format!("{at} {what}; a device is created only in a new or empty directory")));
            }
        } else if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty() && !p.exists()) {
            // Creating the missing folders above would hide a mistyped path as silently as a user's folder would.
            let (at, up) = (dir.display(), parent.display());
            return Err(SimError::Image(format!("{at}: its parent directory {up} does not exist; create it first")));
        }
        fs::create_dir_all(dir)?;
        let lock = lock(dir)?;
        fs::write(dir.join("nearflash.toml"), tree.to_toml_string())?;
        let h = Headers::new(&cfg);
        let img = Image { dir: dir.to_path_buf(), _lock: lock, durability, materialised: materialise, ckpt: h.ckpt };
        let geo = Geometry::from_config(&cfg);
        let store = FtlStore {
            l2p: MappedU32::create(&img.dir.join("l2p.bin"), &h.l2p)?,
            oob: MappedRecords::create(&img.dir.join("oob.bin"), &h.oob)?,
            data: if materialise {
                DataStore::create(&img.dir.join("data.bin"), &h.data, geo.sector_size)?
            } else {
                DataStore::none(geo.sector_size, geo.page_size)
            },
            trims: TrimJournal::create(&img.dir.join("trim.log"), &h.trim, cfg.logical_sectors())?,
        };
        img.write_state(false)?;
        Ok((img, store))
    }

    /// Opens an existing image (never creating anything); returns its configuration and how it was left.
    /// A missing, truncated, foreign or damaged file is refused with its name.
    pub fn open(dir: &Path, durability: Durability) -> Result<(Image, ConfigTree, FtlStore, Opened)> {
        let state = read_state(dir)?;
        let lock = lock(dir)?;
        let (tree, cfg) = read_tree(dir)?;
        let h = Headers::new(&cfg);
        let materialised = state.materialised;
        let img = Image { dir: dir.to_path_buf(), _lock: lock, durability, materialised, ckpt: h.ckpt };
        let geo = Geometry::from_config(&cfg);
        let store = FtlStore {
            l2p: MappedU32::open(&img.dir.join("l2p.bin"), &h.l2p)?,
            oob: MappedRecords::open(&img.dir.join("oob.bin"), &h.oob)?,
            data: if img.materialised {
                DataStore::open(&img.dir.join("data.bin"), &h.data, geo.sector_size)?
            } else {
                DataStore::none(geo.sector_size, geo.page_size)
            },
            trims: TrimJournal::open(&img.dir.join("trim.log"), &h.trim, cfg.logical_sectors())?,
        };
        let ckpt = img.read_checkpoint(&h.ckpt, &geo)?;
        let limit = geo.pages() * u64::from(geo.sectors_per_page);
        let above = if u64::from(store.l2p.max_at_open()) > limit { store.l2p.first_entry_above(limit) } else { None };
        if let Some((lba, e)) = above {
            return Err(SimError::Image(format!(
                "l2p.bin: LBA {lba} maps to physical sector {} past the flash's {limit}; see `nearflash repair`",
                u64::from(e) - 1
            )));
        }
        let opened = if state.clean {
            let stray = store.trims.record_bytes()?;
            if stray > 0 {
                return Err(SimError::Image(format!(
                    "trim.log: holds {stray} bytes of records after a clean close (checkpoints empty it); see \
                     `nearflash repair` ({})",
                    img.dir.join("trim.log").display()
                )));
            }
            if store.l2p.digest() != ckpt.l2p_digest {
                return Err(SimError::Image(format!(
                    "l2p.bin: the mapping table does not match the checkpoint taken at the last clean close (damaged \
                     since); see `nearflash repair` ({})",
                    img.dir.join("l2p.bin").display()
                )));
            }
            Opened::Clean(ckpt.table, ckpt.seq)
        } else {
            Opened::Unclean(Some((ckpt.table, ckpt.seq)))
        };
        img.write_state(false)?;
        Ok((img, tree, store, opened))
    }

    /// In-memory storage for a device without a directory (data in anonymous memory, see `store::DataStore::memory`),
    /// keeping at most `limit` bytes of data (None: the host's RAM).
    pub fn memory_store(cfg: &DeviceConfig, materialise: bool, limit: Option<u64>) -> Result<FtlStore> {
        let geo = Geometry::from_config(cfg);
        let spp = geo.sectors_per_page as usize;
        let data = if materialise {
            DataStore::memory(geo.sector_size, geo.page_size, geo.pages_per_block, geo.blocks(), limit)?
        } else {
            DataStore::none(geo.sector_size, geo.page_size)
        };
        Ok(FtlStore {
            l2p: MappedU32::anonymous(cfg.logical_sectors())?,
            oob: MappedRecords::anonymous(oob::stride(spp), geo.pages())?,
            data,
            trims: TrimJournal::none(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn materialised(&self) -> bool {
        self.materialised
    }

    fn write_state(&self, clean: bool) -> Result<()> {
        let s = State { format: FORMAT, clean, materialised: self.materialised };
        let text = serde_json::to_string_pretty(&s).expect("state serializes");
        write_atomic(&self.dir.join("state.json"), text.as_bytes(), self.durability == Durability::Fsync)
    }

    fn read_checkpoint(&self, header: &FileHeader, geo: &Geometry) -> Result<Checkpoint> {
        read_checkpoint(&self.dir.join("checkpoint.bin"), header, geo)
    }

    /// Makes the FTL's current state the recovery starting point: mapping and OOB written back, block table and
    /// sequence number replaced atomically, trim journal emptied.
    pub fn checkpoint(&self, ftl: &mut Ftl) -> Result<()> {
        let sync = self.durability == Durability::Fsync;
        ftl.store.l2p.flush()?;
        ftl.store.oob.flush()?;
        if sync {
            ftl.store.data.sync()?;
        }
        let (table, seq) = ftl.checkpoint_state();
        let digest = ftl.store.l2p.digest();
        write_atomic(&self.dir.join("checkpoint.bin"), &encode_checkpoint(&self.ckpt, seq, digest, &table), sync)?;
        ftl.store.trims.clear()
    }

    /// Durability point of a Flush command (data, OOB and journal already hold everything flushed).
    pub fn flush(&self, ftl: &Ftl) -> Result<()> {
        if self.durability == Durability::Fsync {
            ftl.store.data.sync()?;
            ftl.store.oob.flush()?;
            ftl.store.l2p.flush()?;
            ftl.store.trims.sync()?;
        }
        Ok(())
    }

    /// Clean shutdown: checkpoint and mark clean.
    pub fn close(&self, ftl: &mut Ftl) -> Result<()> {
        self.checkpoint(ftl)?;
        self.write_state(true)
    }
}

/// `checkpoint.bin`: header, then `seq: u64`, `l2p digest: u64`, `table length: u64`, the block table, and a
/// crc32 of everything before it.
fn encode_checkpoint(header: &FileHeader, seq: u64, digest: u64, table: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(crate::store::HEADER_BYTES + 28 + table.len());
    b.extend_from_slice(&header.encode());
    b.extend_from_slice(&seq.to_le_bytes());
    b.extend_from_slice(&digest.to_le_bytes());
    b.extend_from_slice(&(table.len() as u64).to_le_bytes());
    b.extend_from_slice(table);
    let crc = crc32fast::hash(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    b
}

pub(crate) fn read_checkpoint(path: &Path, header: &FileHeader, geo: &Geometry) -> Result<Checkpoint> {
    let bytes = fs::read(path).map_err(|e| crate::store::missing(path, &e))?;
    header.check(path, &bytes)?;
    let at = path.display();
    let bad = |what: &str| SimError::Image(format!("checkpoint.bin: {what}; see `nearflash repair` ({at})"));
    let h = crate::store::HEADER_BYTES;
    if bytes.len() < h + 28 {
        return Err(bad("truncated"));
    }
    let (body, crc) = bytes.split_at(bytes.len() - 4);
    if crc32fast::hash(body) != u32::from_le_bytes(crc.try_into().expect("4 bytes")) {
        return Err(bad("fails its checksum"));
    }
    let rd = |o: usize| u64::from_le_bytes(body[o..o + 8].try_into().expect("8 bytes"));
    let (seq, l2p_digest, len) = (rd(h), rd(h + 8), rd(h + 16));
    if len != (body.len() - h - 24) as u64 {
        return Err(bad("block table length does not match the file"));
    }
    let table = BlockTable::from_bytes(&body[h + 24..], geo.planes(), geo.blocks_per_plane)
        .filter(|t| t.info.iter().all(|b| b.pages_written <= geo.pages_per_block))
        .ok_or_else(|| bad("block table does not fit the geometry"))?;
    Ok(Checkpoint { table, seq, l2p_digest })
}
