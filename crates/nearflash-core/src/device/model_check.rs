//! Model-based checking of a whole device, in the manner of redb's fuzzer: a byte string is read as a sequence of
//! write / read / trim / flush / reopen / crash operations on a small image-backed device and on a plain map of
//! what each LBA must hold; every read is checked against the map.
//!
//! A crash drops the device without closing it (as `kill -9` leaves the image) and reopens it. What was flushed
//! must survive exactly; an LBA written or trimmed since the last Flush may hold any value it took since then.
//! Used by the `device_model` fuzz target (`scripts/fuzz.sh`) and by a seeded test in `device/tests.rs`.

use super::{Device, DeviceOptions};
use crate::config::{load_preset, ConfigTree};
use crate::nvme::DataBuf;
use crate::nvme::{encode_dsm_ranges, opcode, Sqe};
use std::collections::HashMap;

/// A small device that garbage-collects after a few thousand writes (with `overrides` on top).
fn tiny_tree(overrides: &[(&str, &str)]) -> ConfigTree {
    let mut t = load_preset("cosmos-plus").expect("built-in preset");
    for (k, v) in [
        ("channels", "2"),
        ("chips_per_channel", "1"),
        ("blocks_per_plane", "16"),
        ("pages_per_block", "16"),
        ("over_provisioning", "35%"),
        ("gc_start_free_blocks", "3"),
        ("gc_stop_free_blocks", "3"),
        ("write_buffer", "256KiB"),
    ]
    .iter()
    .chain(overrides)
    {
        t.set(k, v).expect("valid override");
    }
    t
}

/// The value a sector holds: `None` reads as zeroes, `Some(tag)` is a sector written with `tag`.
type Value = Option<u32>;

pub struct ModelCheck {
    dir: tempfile::TempDir,
    dev: Option<Device>,
    lbas: u64,
    lba_bytes: usize,
    /// What each LBA holds now (absent: never written, zeroes).
    model: HashMap<u64, Value>,
    /// LBAs changed since the last Flush, with every value they may hold after a crash.
    unflushed: HashMap<u64, Vec<Value>>,
    next_tag: u32,
    reopens: u64,
    /// Reopens and crashes an input may make; later ones are Flushes (each reopen re-parses the image's preset and
    /// replays it, the most expensive operation by far).
    max_reopens: u64,
    pub ops: u64,
}

/// A sector written with `tag` at `lba`: one word repeated. Built and compared whole (`repeat`, slice equality: one
/// memcpy / memcmp each), not byte by byte: under the fuzzer's coverage instrumentation a comparison per byte made
/// the harness itself take most of each execution.
fn sector(lba: u64, tag: u32, bytes: usize) -> Vec<u8> {
    (lba << 32 | u64::from(tag)).to_le_bytes().repeat(bytes / 8)
}

impl ModelCheck {
    pub fn new(overrides: &[(&str, &str)]) -> Result<ModelCheck, String> {
        // In memory where the host has it: every close and checkpoint msyncs the image's tables.
        let shm = std::path::Path::new("/dev/shm");
        let dir = if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() };
        let dir = dir.map_err(|e| e.to_string())?;
        let path = dir.path().join("dev");
        let mut dev = Device::create(&path, tiny_tree(overrides), DeviceOptions::default()).map_err(|e| e.to_string())?;
        dev.create_queue_pair(1, 32).map_err(|e| e.to_string())?;
        let (lbas, lba_bytes) = (dev.namespace().lbas, dev.lba_bytes() as usize);
        Ok(ModelCheck {
            dir,
            dev: Some(dev),
            lbas,
            lba_bytes,
            model: HashMap::new(),
            unflushed: HashMap::new(),
            next_tag: 1,
            reopens: 0,
            max_reopens: u64::MAX,
            ops: 0,
        })
    }

    pub(crate) fn dev(&mut self) -> &mut Device {
        self.dev.as_mut().expect("device is open between operations")
    }

    fn exec(&mut self, sqe: Sqe, data: DataBuf<'_>, what: &str) -> Result<(), String> {
        let d = self.dev().execute(1, sqe, data).map_err(|e| format!("{what}: {e}"))?;
        if !d.status.is_success() {
            return Err(format!("{what}: {}", d.status));
        }
        Ok(())
    }

    fn changed(&mut self, lba: u64, v: Value) {
        let was = self.model.get(&lba).copied().flatten();
        self.unflushed.entry(lba).or_insert_with(|| vec![was]).push(v);
        self.model.insert(lba, v);
    }

    /// Reads `n` LBAs and returns their decoded values.
    fn read(&mut self, lba: u64, n: u32) -> Result<Vec<Value>, String> {
        let lb = self.lba_bytes;
        let mut buf = vec![0u8; n as usize * lb];
        self.exec(Sqe::rw(opcode::READ, 0, lba, n), DataBuf::FromDevice(&mut buf), &format!("read {lba}+{n}"))?;
        let mut out = Vec::with_capacity(n as usize);
        let zeroes = vec![0u8; lb];
        for (i, s) in buf.chunks_exact(lb).enumerate() {
            let l = lba + i as u64;
            if s == zeroes.as_slice() {
                out.push(None);
                continue;
            }
            let w = u64::from_le_bytes(s[..8].try_into().expect("8 bytes"));
            if w >> 32 != l || s != sector(l, w as u32, lb).as_slice() {
                return Err(format!("LBA {l}: a torn or misplaced sector (first word {w:#x})"));
            }
            out.push(Some(w as u32));
        }
        Ok(out)
    }

    fn reopen(&mut self, crash: bool) -> Result<(), String> {
        let dev = self.dev.take().expect("open");
        if crash {
            drop(dev); // no close: the image stays marked unclean, as after kill -9
        } else {
            dev.close().map_err(|e| format!("close: {e}"))?;
        }
        let path = self.dir.path().join("dev");
        let mut dev = Device::open(&path, DeviceOptions::default()).map_err(|e| format!("reopen: {e}"))?;
        dev.check_consistency().map_err(|e| format!("after reopen: {e}"))?;
        dev.create_queue_pair(1, 32).map_err(|e| e.to_string())?;
        self.dev = Some(dev);
        if crash {
            // Every LBA changed since the last Flush holds one of the values it took; the rest are exact.
            let mut changed: Vec<(u64, Vec<Value>)> = self.unflushed.drain().collect();
            changed.sort_unstable_by_key(|c| c.0);
            for (lba, allowed) in changed {
                let got = self.read(lba, 1)?[0];
                if !allowed.contains(&got) {
                    return Err(format!("after a crash LBA {lba} holds {got:?}, not one of {allowed:?}"));
                }
                self.model.insert(lba, got);
            }
        }
        self.unflushed.clear();
        // A sixteenth of the known LBAs, a different sixteenth each time (every read is timed, so checking all
        // of them after every reopen would dominate a run); `run` checks all at the end.
        self.reopens += 1;
        let turn = self.reopens % 16;
        self.check(move |lba| lba % 16 == turn)
    }

    /// Reads every LBA the model knows and compares.
    fn check_all(&mut self) -> Result<(), String> {
        self.check(|_| true)
    }

    fn check(&mut self, pick: impl Fn(u64) -> bool) -> Result<(), String> {
        let mut lbas: Vec<u64> = self.model.keys().copied().filter(|&l| pick(l)).collect();
        lbas.sort_unstable();
        for lba in lbas {
            let got = self.read(lba, 1)?[0];
            let want = self.model[&lba];
            if got != want {
                return Err(format!("LBA {lba} holds {got:?}, the model says {want:?}"));
            }
        }
        Ok(())
    }

    /// Runs one operation decoded from the front of `b`; returns the bytes it used.
    pub fn step(&mut self, b: &[u8]) -> Result<usize, String> {
        let Some(&op) = b.first() else { return Ok(1) };
        let arg = |i: usize| u64::from(b.get(i).copied().unwrap_or(0));
        let lba = (arg(1) << 8 | arg(2)) * 7 % self.lbas;
        let n = (1 + arg(3) % 16).min(self.lbas - lba) as u32;
        self.ops += 1;
        match op % 16 {
            0..=5 => {
                let lb = self.lba_bytes;
                let mut data = Vec::with_capacity(n as usize * lb);
                let tag = self.next_tag;
                self.next_tag += 1;
                for i in 0..u64::from(n) {
                    data.extend_from_slice(&sector(lba + i, tag, lb));
                }
                self.exec(Sqe::rw(opcode::WRITE, 0, lba, n), DataBuf::ToDevice(&data), &format!("write {lba}+{n}"))?;
                for i in 0..u64::from(n) {
                    self.changed(lba + i, Some(tag));
                }
            }
            6..=9 => {
                let got = self.read(lba, n)?;
                for (i, g) in got.into_iter().enumerate() {
                    let l = lba + i as u64;
                    let want = self.model.get(&l).copied().flatten();
                    if g != want {
                        return Err(format!("read: LBA {l} holds {g:?}, the model says {want:?}"));
                    }
                }
            }
            10 | 11 => {
                let ranges = encode_dsm_ranges(&[(lba, n)]);
                let sqe = Sqe { opcode: opcode::DSM, nsid: 1, cdw11: 1 << 2, ..Sqe::default() };
                self.exec(sqe, DataBuf::ToDevice(&ranges), &format!("trim {lba}+{n}"))?;
                for i in 0..u64::from(n) {
                    self.changed(lba + i, None);
                }
            }
            14 | 15 if self.reopens < self.max_reopens => self.reopen(op % 16 == 15)?,
            _ => {
                self.exec(Sqe { opcode: opcode::FLUSH, nsid: 1, ..Sqe::default() }, DataBuf::None, "flush")?;
                self.unflushed.clear();
            }
        }
        Ok(4)
    }

    /// Runs every operation in `bytes`, then checks every LBA.
    pub fn run(bytes: &[u8]) -> Result<ModelCheck, String> {
        Self::run_with(bytes, &[])
    }

    /// As `run`, on the small device with configuration `overrides`.
    pub fn run_with(bytes: &[u8], overrides: &[(&str, &str)]) -> Result<ModelCheck, String> {
        Self::run_capped(bytes, overrides, u64::MAX)
    }

    /// As `run_with`, making at most `max_reopens` reopens and crashes (later ones are Flushes): the fuzz target's
    /// way to spend its time on many short sequences rather than on a few dozen reopens per input.
    pub fn run_capped(bytes: &[u8], overrides: &[(&str, &str)], max_reopens: u64) -> Result<ModelCheck, String> {
        let mut m = ModelCheck::new(overrides)?;
        m.max_reopens = max_reopens;
        let mut at = 0;
        while at < bytes.len() {
            let used = m.step(&bytes[at..]).map_err(|e| format!("operation {} (byte {at}): {e}", m.ops))?;
            at += used;
        }
        m.check_all()?;
        Ok(m)
    }
}
