//! The nbdkit plugin that exports a nearflash device over NBD: `nbdkit libnearflash_nbd.so image=DIR ...`, started
//! by `nearflash serve` (python/nearflash/nbd/launch.py), which checks every value first.
//!
//! Thread model parallel: nbdkit's worker threads call in concurrently, and each request becomes its NVMe commands
//! on the shared device (`nearflash_workloads::serve`), so the device sees the clients' queue depth; `pace=none`
//! runs as fast as the simulator, `pace=realtime` holds replies until the wall clock reaches their modelled
//! completion. Pace none's `reaction_lag=N` and `reaction_us=US` (0: `nearflash serve --serial`) are
//! `ServeConfig::reaction_lag` and `reaction_window` (defaults there).
//! Connections are served by one device (each on an I/O queue of its own while the device has queues
//! to spare): a Flush on any of them covers every write completed before it, so multi-conn is advertised.
//!
//!     NBD_CMD_READ            Read (split at MDTS)
//!     NBD_CMD_WRITE           Write (FUA flag -> the Write's FUA bit)
//!     NBD_CMD_FLUSH           Flush
//!     NBD_CMD_TRIM            Dataset Management, deallocate (FUA -> then a Flush)
//!     NBD_CMD_WRITE_ZEROES    Write Zeroes (MAY_TRIM -> its Deallocate bit; FUA -> then a Flush)
//!
//! While serving, `<image>/serve.json` holds the device's figures (rewritten within ~0.4 s of a request and when a
//! connection closes; the layout `nearflash info` reads, python/nearflash/nbd/stats.py).

use nbdkit::*;
use nearflash_core::nvme::Status;
use nearflash_core::{Device, DeviceOptions, SimError};
use nearflash_workloads::serve::{Io, Pace, ServeConfig, Shared};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Seconds between rewrites of the status file while requests arrive.
const STATUS_PERIOD: Duration = Duration::from_millis(200);

#[derive(Default)]
struct Config {
    image: Option<PathBuf>,
    seed: u64,
    ext: Vec<String>,
    address: String,
    readonly: bool,
    pace: Option<Pace>,
    threads: Option<u32>,
    burst_us: Option<u64>,
    reaction_us: Option<u64>,
    reaction_lag: Option<u32>,
    identify: Option<Value>,
    recovery: Option<Value>,
}

static CONFIG: Mutex<Option<Config>> = Mutex::new(None);
static SHARED: OnceLock<Arc<Shared>> = OnceLock::new();
/// What the status file says besides the measured figures (read once, before serving).
static STATIC: OnceLock<Value> = OnceLock::new();
static DIRTY: AtomicBool = AtomicBool::new(false);
static STOP: AtomicBool = AtomicBool::new(false);
/// Held while the status file is written (and while `unload` removes it): the status thread and the connections'
/// closes write it, and a write of one thread must not be renamed into place half-written by another (they share
/// the temporary file's name), nor an older snapshot replace a newer one, nor a write land after `unload`.
static STATUS_FILE: Mutex<()> = Mutex::new(());

fn einval(msg: impl Into<String>) -> Error {
    Error::new(libc::EINVAL, msg.into())
}

fn eio(e: impl std::fmt::Display) -> Error {
    Error::new(libc::EIO, e.to_string())
}

fn shared() -> Result<&'static Arc<Shared>> {
    SHARED.get().ok_or_else(|| eio("the device is not open"))
}

/// The device's status as the client's errno.
fn check(status: Status, what: &str) -> Result<()> {
    if status.is_success() {
        return Ok(());
    }
    let errno = if status == Status::CAPACITY_EXCEEDED { libc::ENOSPC } else { libc::EIO };
    Err(Error::new(errno, format!("{what}: {status}")))
}

fn with_config<T>(f: impl FnOnce(&mut Config) -> T) -> T {
    let mut guard = CONFIG.lock().unwrap_or_else(|e| e.into_inner());
    f(guard.get_or_insert_with(Config::default))
}

/// The extension crates register themselves with the core (`inventory`); naming a type of each links them in.
fn linked_extensions() -> [std::any::TypeId; 6] {
    use std::any::TypeId;
    [
        TypeId::of::<nearflash_recssd::firmware::RecssdFirmware>(),
        TypeId::of::<nearflash_issd::agent::IssdExtension>(),
        TypeId::of::<nearflash_nice::firmware::NiceFirmware>(),
        TypeId::of::<nearflash_ndsearch::firmware::SearSsd>(),
        TypeId::of::<nearflash_programs::firmware::ProgramsFirmware>(),
        TypeId::of::<nearflash_cognitive::firmware::CognitiveFirmware>(),
    ]
}

fn write_status(state: &str) {
    let _file = STATUS_FILE.lock().unwrap_or_else(|e| e.into_inner());
    if STOP.load(Ordering::Acquire) {
        return; // unloading: the file is removed (or about to be)
    }
    let (Some(shared), Some(fixed)) = (SHARED.get(), STATIC.get()) else { return };
    let Ok((counts, pacing, now, report)) = shared.snapshot() else { return };
    let (image, address, readonly) = with_config(|c| (c.image.clone(), c.address.clone(), c.readonly));
    let Some(image) = image else { return };
    let mut status = json!({
        "state": state,
        "pid": std::process::id(),
        "address": address,
        "readonly": readonly,
        "updated_unix": SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64()),
        "now_ns": now,
        "requests": counts,
        "pacing": pacing,
        // Reading the report issues no command: status writes never move the virtual clock.
        "report": report,
    });
    if let (Some(s), Some(f)) = (status.as_object_mut(), fixed.as_object()) {
        s.extend(f.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    // Replaced in one step, so that a reader never sees half of it.
    let tmp = image.join(format!(".serve.json.{}.tmp", std::process::id()));
    if std::fs::write(&tmp, serde_json::to_vec_pretty(&status).unwrap_or_default()).is_ok() {
        let _ = std::fs::rename(&tmp, image.join("serve.json"));
    }
}

/// A request was served: the status file is due for a rewrite. Written only when it was clean, so that requests on
/// both cores do not take the flag's cache line from each other on every request.
fn mark_dirty() {
    if !DIRTY.load(Ordering::Relaxed) {
        DIRTY.store(true, Ordering::Release);
    }
}

fn status_loop() {
    while !STOP.load(Ordering::Acquire) {
        std::thread::sleep(STATUS_PERIOD);
        if DIRTY.swap(false, Ordering::AcqRel) && !STOP.load(Ordering::Acquire) {
            std::thread::sleep(STATUS_PERIOD); // gather a burst of requests into one rewrite
            DIRTY.store(false, Ordering::Release);
            write_status("serving");
        }
    }
}

/// One client connection.
struct Conn {
    id: u64,
    lba_bytes: u64,
    lbas: u64,
}

impl Drop for Conn {
    /// nbdkit's close: the status file is rewritten before the client learns that its connection is gone.
    fn drop(&mut self) {
        if let Some(s) = SHARED.get() {
            s.disconnect(self.id);
        }
        write_status("serving");
    }
}

impl Conn {
    fn blocks(&self, offset: u64, count: u64) -> Result<(u64, u64)> {
        if !offset.is_multiple_of(self.lba_bytes) || !count.is_multiple_of(self.lba_bytes) {
            return Err(einval(format!("request at {offset}+{count} is not aligned to the {} B block", self.lba_bytes)));
        }
        Ok((offset / self.lba_bytes, count / self.lba_bytes))
    }

    fn serve(&self, io: Io<'_>, what: &str) -> Result<()> {
        let outcome = shared()?.io(self.id, io).map_err(eio);
        mark_dirty();
        check(outcome?.status, what)
    }
}

impl Server for Conn {
    fn name() -> &'static str {
        "nearflash"
    }

    fn description() -> Option<&'static str> {
        Some("an emulated nearflash SSD (image=DIR made by `nearflash create`)")
    }

    fn config(key: &str, value: &str) -> Result<()> {
        let bad = |what: &str| einval(format!("{key}={value}: {what}"));
        with_config(|c| {
            match key {
                "image" => c.image = Some(PathBuf::from(value)),
                "seed" => c.seed = value.parse().map_err(|_| bad("a non-negative integer"))?,
                "ext" => c.ext.push(value.to_string()),
                "address" => c.address = value.to_string(),
                "readonly" => c.readonly = value == "true",
                "pace" => c.pace = Some(value.parse().map_err(|e: SimError| bad(&e.to_string()))?),
                "threads" => c.threads = Some(value.parse().ok().filter(|&t: &u32| t > 0).ok_or_else(|| bad("a positive integer"))?),
                "burst_us" => c.burst_us = Some(value.parse().map_err(|_| bad("microseconds"))?),
                "reaction_us" => c.reaction_us = Some(value.parse().map_err(|_| bad("microseconds"))?),
                "reaction_lag" => {
                    c.reaction_lag = Some(value.parse().ok().filter(|&n: &u32| n > 0).ok_or_else(|| bad("a positive integer"))?)
                }
                "identify" => c.identify = Some(serde_json::from_str(value).map_err(|e| bad(&e.to_string()))?),
                "recovery" => c.recovery = Some(serde_json::from_str(value).map_err(|e| bad(&e.to_string()))?),
                _ => {
                    return Err(einval(format!(
                        "unknown parameter {key:?} (image, ext, seed, address, readonly, pace, threads, burst_us, reaction_us, reaction_lag, identify, recovery)"
                    )))
                }
            }
            Ok(())
        })
    }

    fn config_complete() -> Result<()> {
        with_config(|c| if c.image.is_none() { Err(einval("image=DIR is required")) } else { Ok(()) })
    }

    fn get_ready() -> Result<()> {
        std::hint::black_box(linked_extensions());
        let (image, seed, exts, cfg, identify, recovery) = with_config(|c| {
            let cfg = ServeConfig {
                pace: c.pace.unwrap_or(Pace::None),
                threads: c.threads.unwrap_or(ServeConfig::default().threads),
                burst_window: c.burst_us.map_or(ServeConfig::default().burst_window, Duration::from_micros),
                reaction_lag: c.reaction_lag.unwrap_or(ServeConfig::default().reaction_lag),
                reaction_window: c.reaction_us.map_or(ServeConfig::default().reaction_window, Duration::from_micros),
                ..ServeConfig::default()
            };
            (c.image.clone().expect("checked"), c.seed, c.ext.clone(), cfg, c.identify.clone(), c.recovery.clone())
        });
        let mut dev = Device::open(&image, DeviceOptions { seed, ..DeviceOptions::default() }).map_err(eio)?;
        let mut names = Vec::new();
        for spec in &exts {
            let (name, params) = spec.split_once(':').unwrap_or((spec, ""));
            let params: Value = if params.is_empty() { json!({}) } else { serde_json::from_str(params).map_err(eio)? };
            let ext = nearflash_core::ext::build(name, &params, dev.config()).map_err(eio)?;
            dev.attach(ext).map_err(eio)?;
            names.push(name.to_string());
        }
        let recovered = dev.recovery().map(|r| serde_json::to_value(r).unwrap_or(Value::Null)).or(recovery);
        let ns = dev.namespace();
        let preset = dev.config_tree().meta("name").unwrap_or("custom").to_string();
        let fixed = json!({
            "identify": identify.unwrap_or_else(|| json!({})),
            "lba_bytes": dev.lba_bytes(),
            "lbas": ns.lbas,
            "preset": preset,
            "extensions": names,
            "recovery": recovered,
        });
        let _ = STATIC.set(fixed);
        let shared = Shared::new(dev, cfg).map_err(eio)?;
        SHARED.set(Arc::new(shared)).map_err(|_| eio("the device is already open"))?;
        write_status("serving");
        Ok(())
    }

    fn after_fork() -> Result<()> {
        std::thread::Builder::new().name("nearflash-status".into()).spawn(status_loop).map_err(eio)?;
        Ok(())
    }

    fn unload() {
        STOP.store(true, Ordering::Release);
        let _file = STATUS_FILE.lock().unwrap_or_else(|e| e.into_inner()); // a write in progress ends first
        let Some(shared) = SHARED.get() else { return };
        if let Some(dev) = shared.take() {
            if let Err(e) = dev.close() {
                eprintln!("nearflash: closing the image failed: {e}");
            }
        }
        if let Some(image) = with_config(|c| c.image.clone()) {
            let _ = std::fs::remove_file(image.join("serve.json"));
            let _ = std::fs::remove_file(image.join("serve.pid")); // written by nbdkit -P (nearflash serve)
        }
    }

    fn thread_model() -> Result<ThreadModel> {
        Ok(ThreadModel::Parallel)
    }

    fn open(_readonly: bool) -> Result<Box<dyn Server>> {
        let s = shared()?;
        if s.pace() == Pace::None {
            // On the connection's thread, before nbdkit starts its worker threads: they inherit the policy.
            nearflash_workloads::serve::batch_scheduling();
        }
        let id = s.connect().map_err(eio)?;
        let (lba_bytes, lbas) = s.with_device(|d| (d.lba_bytes(), d.namespace().lbas)).map_err(eio)?;
        mark_dirty();
        Ok(Box::new(Conn { id, lba_bytes, lbas }))
    }

    fn get_size(&self) -> Result<i64> {
        Ok((self.lbas * self.lba_bytes) as i64)
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let (lba, _) = self.blocks(offset, buf.len() as u64)?;
        self.serve(Io::Read { lba, out: buf }, "read")
    }

    fn write_at(&self, buf: &[u8], offset: u64, flags: Flags) -> Result<()> {
        let (lba, _) = self.blocks(offset, buf.len() as u64)?;
        self.serve(Io::Write { lba, data: buf, fua: flags.contains(Flags::FUA) }, "write")
    }

    fn flush(&self) -> Result<()> {
        self.serve(Io::Flush, "flush")
    }

    fn trim(&self, count: u32, offset: u64, flags: Flags) -> Result<()> {
        let (lba, blocks) = self.blocks(offset, u64::from(count))?;
        self.serve(Io::Trim { lba, blocks, fua: flags.contains(Flags::FUA) }, "trim")
    }

    fn zero(&self, count: u32, offset: u64, flags: Flags) -> Result<()> {
        let (lba, blocks) = self.blocks(offset, u64::from(count))?;
        let io = Io::Zero { lba, blocks, deallocate: flags.contains(Flags::MAY_TRIM), fua: flags.contains(Flags::FUA) };
        self.serve(io, "write zeroes")
    }

    fn can_write(&self) -> Result<bool> {
        Ok(true)
    }

    fn can_flush(&self) -> Result<bool> {
        Ok(true)
    }

    fn can_trim(&self) -> Result<bool> {
        Ok(true)
    }

    fn can_zero(&self) -> Result<bool> {
        Ok(true)
    }

    fn can_fast_zero(&self) -> Result<bool> {
        Ok(true) // Write Zeroes moves no data over the link
    }

    fn can_fua(&self) -> Result<FuaFlags> {
        Ok(FuaFlags::Native)
    }

    fn can_multi_conn(&self) -> Result<bool> {
        Ok(true) // one device behind every connection, and a Flush covers them all
    }

    fn is_rotational(&self) -> Result<bool> {
        Ok(false)
    }
}

plugin!(Conn {
    config, config_complete, get_ready, after_fork, unload, thread_model, write_at, flush, trim, zero, can_write,
    can_flush, can_trim, can_zero, can_fast_zero, can_fua, can_multi_conn, is_rotational
});
