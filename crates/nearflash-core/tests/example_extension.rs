//! The example extension `probe`: a complete, small firmware extension as a new system writes one. It declares its
//! parameters with `ext_params!`, registers itself with `inventory::submit!` and is built by name through
//! `nearflash_core::ext::build` (parameters resolved from the preset's `[ext.probe]` section, then JSON overrides),
//! and it makes every call of `AttachCtx`, `ExecCtx` and `HostCtx` through the device's command interface:
//! logical reads into DRAM or a unit's buffer, writes with and without spare bytes, physical page, column and
//! multi-plane reads with their ECC outcome, programs and erases in the reserved area, spare bytes that survive GC
//! and a crash, observed writes, relocations, saved state, an intercepted flag bit and hyper-addresses, refusals
//! with reasons, and a host-side baseline on `HostCtx`. `every_context_call_is_exercised` fails when one of the three
//! contexts gains a public call that this example does not make.

use nearflash_core::config::{load_preset, ConfigTree, ExtParams};
use nearflash_core::ext::{
    self, AttachCtx, ClassId, DataBuf, EccOutcome, ExecCtx, ExtCompletion, Extension, HostCtx, HostEvent, Intercept,
    Level, OpClass, Placement, ReadTo, Registration, Relocation, Sqe, Status, Time, UnitHandle, UnitSpec, SPARE_BYTES,
};
use nearflash_core::nvme::opcode;
use nearflash_core::{Device, DeviceOptions, SimError};

const NAME: &str = "probe";

nearflash_core::ext_params! {
    /// The probe's parameters (a real system's cite their sources: the paper, a datasheet, or "assumed" and why).
    pub struct ProbeParams {
        /// Vendor I/O opcode of the probe's commands.
        opcode: Opcode = 0x90, "opcode", "assumed: a vendor-specific I/O opcode";
        /// Clock of the processing elements beside the dies.
        pe_clock: Frequency = 800, "MHz", "assumed: an example value";
        /// Dynamic energy per PE cycle.
        pe_energy: Energy = 1, "pJ", "assumed: an example value";
        /// Static power per PE.
        pe_static: Power = 1, "mW", "assumed: an example value";
        /// Firmware instructions per byte SUM adds up on a controller core.
        sum_instructions_per_byte: Count = 2, "count", "assumed: a load and an add per byte";
        /// Blocks advertised past the FTL's capacity: writes there are the probe's mailbox (hyper-addresses).
        mailbox_lbas: Int = 64 in 1..=1024, "count", "assumed: an example value";
    }
}

/// The parameters as `Registration::build` and `attach` resolve them: defaults, then the preset's `[ext.probe]`
/// section (`{ value, unit, source }` per key, unit-checked), then the JSON overrides given to `build`.
fn resolve(section: Option<&toml::Table>, overrides: &serde_json::Value) -> nearflash_core::Result<ProbeParams> {
    let mut p = ProbeParams::from_section(section)?;
    p.apply_json_object(overrides, &[])?;
    Ok(p)
}

inventory::submit! {
    Registration {
        name: NAME,
        about: "the example extension: every ExecCtx, AttachCtx and HostCtx call",
        build: |overrides, cfg| {
            // Resolved here so that a bad parameter fails before anything is attached; attach resolves again
            // against the preset of the device it joins.
            resolve(cfg.ext.get(NAME).and_then(|v| v.as_table()), overrides)?;
            Ok(Box::new(Probe { overrides: overrides.clone(), ..Probe::default() }))
        },
    }
}

/// Sub-commands, in CDW10; their argument in CDW11 (an LBA, a PPN or a reserved-block index), more in CDW12-13.
mod sub {
    pub const READ_PAGE: u32 = 0;
    pub const PROGRAM: u32 = 1;
    pub const ERASE: u32 = 2;
    pub const WRITE_TAGGED: u32 = 3;
    pub const SPARE: u32 = 4;
    pub const PLACE: u32 = 5;
    pub const SENSE: u32 = 6;
    pub const COMPUTE: u32 = 7;
    pub const SENSE_PLANES: u32 = 8;
    pub const SUM: u32 = 9;
    pub const COPY: u32 = 10;
    pub const COLUMN: u32 = 11;
    pub const ANNOTATE: u32 = 12;
    pub const PAGE_SPARE: u32 = 13;
}

#[derive(Default)]
struct Probe {
    overrides: serde_json::Value,
    p: ProbeParams,
    unit: Option<UnitHandle>,
    /// The flash scheduling class of the probe's own flash work (a normal-level class weighted as the host's
    /// medium-priority queues, so the probe shares the dies with host I/O as a medium queue would).
    class: Option<ClassId>,
    /// The FTL's capacity: LBAs from here on are the mailbox.
    capacity: u64,
    observed: Vec<HostEvent>,
    relocated: u64,
    flagged_reads: u64,
    mailbox: Vec<u8>,
}

/// Bytes a SUM reads at most (one command's worth).
const SUM_MAX_BLOCKS: u32 = 64;

impl Probe {
    fn run(&mut self, ctx: &mut ExecCtx<'_>, sqe: &Sqe, data: DataBuf<'_>) -> Result<(u32, Time), Status> {
        if let Some(class) = self.class {
            ctx.use_class(class);
        }
        let t = ctx.start;
        let arg = sqe.cdw11;
        match sqe.cdw10 {
            sub::READ_PAGE => {
                let DataBuf::FromDevice(out) = data else { return Err(Status::INVALID_FIELD) };
                let r = ctx.read_page(t, u64::from(arg), ReadTo::Dram, out)?;
                let dw0 = match r.ecc {
                    EccOutcome::Corrected => 0,
                    EccOutcome::Retried(n) => n,
                    EccOutcome::SoftDecoded(n) => 100 + n,
                    EccOutcome::Uncorrectable(_) => unreachable!("an uncorrectable read is an error"),
                };
                Ok((dw0, ctx.to_host(r.done, r.moved)))
            }
            sub::PROGRAM => {
                let DataBuf::ToDevice(src) = data else { return Err(Status::INVALID_FIELD) };
                let block = ctx.reserved_block(u64::from(arg))?;
                let reserved = ctx.is_reserved_block(block);
                assert!(reserved, "reserved_block names a reserved block");
                let ppn = ctx.geometry().block_first_ppn(block) + u64::from(sqe.cdw12);
                let t = ctx.from_host(t, src.len() as u64);
                let done = ctx.program_page(t, ppn, src, &src[..SPARE_BYTES.min(src.len())])?;
                Ok((ppn as u32, done))
            }
            sub::ERASE => {
                let per_plane = u64::from(ctx.reserved_blocks_per_plane());
                if u64::from(arg) >= per_plane * u64::from(ctx.geometry().planes()) {
                    return Err(ctx.explain(Status::LBA_OUT_OF_RANGE, Some(44), format!("reserved block {arg}: {per_plane} per plane")));
                }
                let block = ctx.reserved_block(u64::from(arg))?;
                Ok((block, ctx.erase_block(t, block)?))
            }
            sub::WRITE_TAGGED => {
                let DataBuf::ToDevice(src) = data else { return Err(Status::INVALID_FIELD) };
                let blocks = src.len() as u64 / ctx.lba_bytes();
                let spare: Vec<u8> = (0..blocks).flat_map(|i| tag(u64::from(arg) + i)).collect();
                let t = ctx.from_host(t, src.len() as u64);
                Ok((0, ctx.write_lbas_with_spare(t, u64::from(arg), src, &spare)?))
            }
            sub::SPARE => {
                let DataBuf::FromDevice(out) = data else { return Err(Status::INVALID_FIELD) };
                let s = ctx.spare(u64::from(arg))?;
                out[..SPARE_BYTES].copy_from_slice(&s);
                Ok((0, ctx.to_host(t, SPARE_BYTES as u64)))
            }
            sub::PLACE => match ctx.placement(u64::from(arg))? {
                Placement::Flash { addr, slot } => {
                    assert_eq!(ctx.page_addr(addr.ppn)?, addr);
                    Ok(((addr.ppn as u32) << 4 | slot, t))
                }
                Placement::Buffered => Ok((u32::MAX - 1, t)),
                Placement::Unmapped => Ok((u32::MAX, t)),
            },
            sub::SENSE => {
                let r = ctx.sense_page(t, u64::from(arg), 0)?;
                let unit = self.unit.expect("attached");
                let member = r.addr.die % unit.count;
                Ok((r.addr.die, ctx.compute(r.done, unit, member, f64::from(sqe.cdw12))))
            }
            sub::SENSE_PLANES => self.sense_planes(ctx, u64::from(arg), u64::from(sqe.cdw12)),
            sub::COMPUTE => {
                let fw = ctx.firmware(t, 1000.0);
                let fw = ctx.firmware_on(fw, ctx.controller_cores() - 1, 1000.0);
                let h = ctx.host_compute(fw, 1e6, 1e6, 1);
                ctx.charge("probe.extra", 5e6);
                let x = ctx.from_host(h, 4096);
                use rand::Rng as _;
                let draw: u32 = ctx.rng().gen_range(0..1000);
                Ok((draw, x))
            }
            sub::SUM => self.sum(ctx, u64::from(arg), sqe.cdw12, sqe.cdw13 != 0, data),
            sub::COPY => {
                // Copies CDW12 blocks from LBA `arg` to LBA CDW13 inside the device.
                let (from, nlb, to) = (u64::from(arg), sqe.cdw12, u64::from(sqe.cdw13));
                if nlb == 0 || nlb > SUM_MAX_BLOCKS || to + u64::from(nlb) > ctx.lbas() {
                    return Err(ctx.explain(Status::INVALID_FIELD, Some(48), format!("copy of {nlb} blocks to LBA {to}")));
                }
                // A page the ECC cannot correct is reported (not a failed read), so the refusal names the lost block
                // and nothing is written.
                let mut buf = vec![0u8; (u64::from(nlb) * ctx.lba_bytes()) as usize];
                let r = ctx.flash_read_reporting(t, from, nlb, ReadTo::Dram, &mut buf)?;
                if let Some(lost) = r.pages.iter().find(|p| matches!(p.ecc, EccOutcome::Uncorrectable(_))) {
                    return Err(ctx.explain(Status::UNRECOVERED_READ_ERROR, None, format!("copy source LBAs {}-{} are lost", lost.lba, lost.lba + u64::from(lost.sectors) - 1)));
                }
                Ok((nlb, ctx.write_lbas(r.done, to, &buf)?))
            }
            sub::COLUMN => {
                // Bytes CDW12 .. CDW12 + CDW13 of physical page `arg`: only their ECC codewords cross the channel.
                let DataBuf::FromDevice(out) = data else { return Err(Status::INVALID_FIELD) };
                let (offset, len) = (u64::from(sqe.cdw12), u64::from(sqe.cdw13));
                let out = out.get_mut(..len as usize).ok_or(Status::INVALID_FIELD)?;
                let r = ctx.read_page_range(t, u64::from(arg), offset, len, ReadTo::Dram, out)?;
                let codewords = r.moved / ctx.config().ecc.codeword_size.0;
                Ok((codewords as u32, ctx.to_host(r.done, len)))
            }
            sub::ANNOTATE => {
                // Replaces LBA `arg`'s spare bytes with a fresh tag; DW0: its physical sector address, as named.
                let lba = u64::from(arg);
                let named = ctx.sector_address(lba)?.ok_or_else(|| ctx.explain(Status::INVALID_FIELD, Some(44), format!("LBA {lba} is unmapped")))?;
                let (psa, done) = ctx.annotate_spare(t, lba, &tag(!lba))?;
                assert_eq!(psa, named);
                Ok((psa as u32, done))
            }
            sub::PAGE_SPARE => {
                let DataBuf::FromDevice(out) = data else { return Err(Status::INVALID_FIELD) };
                let spare = ctx.page_spare(u64::from(arg))?;
                let n = spare.len().min(out.len());
                out[..n].copy_from_slice(&spare[..n]);
                Ok((n as u32, ctx.to_host(t, n as u64)))
            }
            other => Err(ctx.explain(Status::INVALID_FIELD, Some(40), format!("sub-command {other}: the probe knows 0-13"))),
        }
    }

    /// SUM: the bytes of CDW12 blocks from `lba`, added up on a controller core after a read into DRAM, or (CDW13
    /// set) on a PE that reads them into its own buffer, sequencing the flash itself; the 8-byte sum goes to the
    /// host, DW0 its low half.
    fn sum(&mut self, ctx: &mut ExecCtx<'_>, lba: u64, nlb: u32, on_pe: bool, data: DataBuf<'_>) -> Result<(u32, Time), Status> {
        let DataBuf::FromDevice(out) = data else { return Err(Status::INVALID_FIELD) };
        if nlb == 0 || nlb > SUM_MAX_BLOCKS || out.len() < 8 {
            return Err(ctx.explain(Status::INVALID_FIELD, Some(48), format!("sum of {nlb} blocks into {} bytes: 1-{SUM_MAX_BLOCKS} blocks, 8 bytes", out.len())));
        }
        let bytes = u64::from(nlb) * ctx.lba_bytes();
        let mut buf = vec![0u8; bytes as usize];
        let t = ctx.start;
        let done = if on_pe {
            let r = ctx.flash_read_self_sequenced(t, lba, nlb, ReadTo::UnitBuffer, &mut buf)?;
            let unit = self.unit.expect("attached");
            let pe = ctx.compute(r.done, unit, 0, bytes as f64);
            // The PE's pass follows the data's real landing, which work queued on the dies may delay past the
            // forecast `r.done` (unless it has landed already).
            let landed = ctx.flash_end();
            if ctx.ended(landed).is_none() {
                ctx.complete_after(landed, pe - r.done);
            }
            ctx.dram(pe, 8) // the result crosses DRAM on its way to the host
        } else {
            let r = ctx.flash_read(t, lba, nlb, ReadTo::Dram, &mut buf)?;
            ctx.firmware(r.done, bytes as f64 * self.p.sum_instructions_per_byte)
        };
        let sum: u64 = buf.iter().map(|&b| u64::from(b)).sum();
        out[..8].copy_from_slice(&sum.to_le_bytes());
        Ok((sum as u32, ctx.to_host(done, 8)))
    }

    /// SENSE_PLANES: page `ppn` and its siblings at the same offset in the die's other planes, sensed in one
    /// multi-plane operation with `xfer` bytes each to logic beside the die; DW0 the sum of their bytes (as the
    /// single-plane `sense_page_into` of `ppn` reads it for the first).
    fn sense_planes(&mut self, ctx: &mut ExecCtx<'_>, ppn: u64, xfer: u64) -> Result<(u32, Time), Status> {
        let a = ctx.page_addr(ppn)?;
        let g = ctx.geometry().clone();
        let first_plane = a.plane - a.plane_in_die;
        let ppns: Vec<u64> =
            (first_plane..first_plane + g.planes_per_die).map(|p| g.block_first_ppn(g.block_id(p, a.block_in_plane)) + u64::from(a.page)).collect();
        let mut outs = vec![vec![0u8; g.page_size as usize]; ppns.len()];
        let reads = ctx.sense_planes_into(ctx.start, &ppns, &vec![xfer; ppns.len()], &mut outs)?;
        let mut alone = vec![0u8; g.page_size as usize];
        let single = ctx.sense_page_into(reads[0].done, ppn, xfer, &mut alone)?;
        assert_eq!(alone, outs[a.plane_in_die as usize], "one plane's content as a multi-plane read gives it");
        let sum: u64 = outs.iter().flatten().map(|&b| u64::from(b)).sum();
        Ok((sum as u32, single.done))
    }
}

fn tag(lba: u64) -> [u8; SPARE_BYTES] {
    let mut t = [0u8; SPARE_BYTES];
    t[..8].copy_from_slice(&(lba ^ 0xA5A5_5A5A_0F0F_F0F0).to_le_bytes());
    t[31] = 0x7E;
    t
}

impl Extension for Probe {
    fn name(&self) -> &str {
        NAME
    }

    fn attach(&mut self, ctx: &mut AttachCtx<'_>) -> nearflash_core::Result<()> {
        self.p = resolve(ctx.section(NAME), &self.overrides)?;
        if ctx.reserved_blocks_per_plane() == 0 {
            return Err(SimError::Config(format!("{NAME}: needs ftl.ext_reserved_blocks > 0 (physical programs)")));
        }
        ctx.claim_opcode(self.p.opcode)?;
        self.class = Some(ctx.flash_class("probe", Level::Normal, 2)?);
        self.unit = Some(ctx.add_units(&UnitSpec {
            name: "probe.pe".into(),
            count: ctx.geometry().dies(),
            freq_hz: self.p.pe_clock,
            pj_per_cycle: self.p.pe_energy,
            static_mw: self.p.pe_static,
        })?);
        // Reads with CDW12 bit 20 set are the probe's; so are writes past the FTL's capacity (the mailbox).
        ctx.intercept(Intercept::Flag { opcode: opcode::READ, dword: 12, mask: 1 << 20 })?;
        self.capacity = ctx.lbas();
        ctx.advertise_lbas(self.capacity + self.p.mailbox_lbas)?;
        ctx.intercept(Intercept::LbaFrom { opcode: opcode::WRITE, first_lba: self.capacity })?;
        ctx.observe();
        ctx.track_relocations();
        let sector = ctx.config().ftl.sector_size.0;
        assert_eq!(sector, u64::from(ctx.geometry().sector_size), "the preset and the geometry agree");
        Ok(())
    }

    fn execute(&mut self, ctx: &mut ExecCtx<'_>, sqe: &Sqe, data: DataBuf<'_>) -> ExtCompletion {
        let result = match sqe.opcode {
            opcode::READ => self.flagged_read(ctx, sqe, data),
            opcode::WRITE => self.mailbox_write(ctx, sqe, data),
            _ => self.run(ctx, sqe, data),
        };
        match result {
            Ok((dw0, done)) => ExtCompletion { status: Status::SUCCESS, dw0, done },
            Err(s) => {
                if !ctx.is_explained() {
                    // A catch-all reason where nothing deeper explained the failure.
                    ctx.explain(s, None, format!("probe: command {:#04x} sub-command {} failed", sqe.opcode, sqe.cdw10));
                }
                ExtCompletion::failed(s, ctx.start)
            }
        }
    }

    fn observe(&mut self, event: &HostEvent) {
        self.observed.push(*event);
    }

    fn on_relocate(&mut self, moves: &[Relocation]) {
        self.relocated += moves.len() as u64;
    }

    fn save(&self) -> Option<Vec<u8>> {
        Some([self.observed.len() as u64, self.relocated].iter().flat_map(|v| v.to_le_bytes()).collect())
    }

    fn restore(&mut self, state: &[u8]) -> nearflash_core::Result<()> {
        let n = |i: usize| u64::from_le_bytes(state[i * 8..i * 8 + 8].try_into().unwrap());
        self.relocated = n(1);
        self.observed = vec![HostEvent::Write { slba: 0, nlb: 0 }; n(0) as usize];
        Ok(())
    }

    fn report(&self) -> serde_json::Value {
        serde_json::json!({ "flagged_reads": self.flagged_reads, "relocated": self.relocated })
    }

    fn reset_stats(&mut self) {
        self.flagged_reads = 0;
    }
}

impl Probe {
    /// A Read with the flag bit: served as an ordinary read (counted as one in the report).
    fn flagged_read(&mut self, ctx: &mut ExecCtx<'_>, sqe: &Sqe, data: DataBuf<'_>) -> Result<(u32, Time), Status> {
        self.flagged_reads += 1;
        let nlb = sqe.nlb();
        let mut none = [];
        let out = match data {
            DataBuf::FromDevice(out) => out,
            _ => &mut none[..],
        };
        let r = ctx.flash_read(ctx.start, sqe.slba(), nlb, ReadTo::Dram, out)?;
        let bytes = u64::from(nlb) * ctx.lba_bytes();
        ctx.account_as(OpClass::Read, bytes);
        Ok((0, ctx.to_host(r.done, bytes)))
    }

    /// A Write at a hyper-address: its data lands in the probe's mailbox, not in the FTL.
    fn mailbox_write(&mut self, ctx: &mut ExecCtx<'_>, sqe: &Sqe, data: DataBuf<'_>) -> Result<(u32, Time), Status> {
        let DataBuf::ToDevice(src) = data else { return Err(Status::DATA_TRANSFER_ERROR) };
        let t = ctx.from_host(ctx.start, src.len() as u64);
        self.mailbox = src.to_vec();
        Ok(((sqe.slba() - self.capacity) as u32, ctx.dram(t, src.len() as u64)))
    }
}

/// The host side of SUM, as a host library books its baseline: `bytes` read with ordinary Reads cross host DRAM
/// and are added up at `cycles_per_byte`, on one core and spread over every core in scheduler quanta.
/// Returns (one core done, all cores done, the link's shortest time for the bytes in ns).
fn host_sum(h: &mut HostCtx<'_>, bytes: u64, cycles_per_byte: f64) -> (Time, Time, f64) {
    let start = h.now();
    let dram_bw = h.dram_traffic(bytes);
    let ready = start + (bytes as f64 / dram_bw * 1e9) as u64;
    let first = h.earliest_core_start(ready, 1000);
    let cycles = bytes as f64 * cycles_per_byte;
    let one = h.compute(first, cycles, bytes as f64, 1);
    let all = h.compute_sliced(first, cycles, bytes as f64, h.cores(), 100_000.0);
    h.charge("probe.host_accelerator", bytes as f64);
    let hz = h.cpu_hz();
    assert!(hz > 0.0);
    (one, all, bytes as f64 / h.link_bandwidth() * 1e9)
}

fn tree() -> ConfigTree {
    let mut t = load_preset("cosmos-plus").unwrap();
    for (k, v) in [
        ("channels", "2"),
        ("chips_per_channel", "1"),
        ("blocks_per_plane", "48"),
        ("pages_per_block", "16"),
        ("over_provisioning", "25"),
        ("ext_reserved_blocks", "4"),
        ("write_buffer", "256KiB"),
    ] {
        t.set(k, v).unwrap();
    }
    t
}

/// The probe as any front end makes it: by name, through the registry.
fn from_registry(dev: &Device, params: serde_json::Value) -> Box<dyn Extension> {
    ext::build(NAME, &params, dev.config()).unwrap()
}

fn attached(mut dev: Device) -> Device {
    let p = from_registry(&dev, serde_json::Value::Null);
    dev.attach(p).unwrap();
    dev.create_queue_pair(1, 64).unwrap();
    dev
}

fn cmd(dev: &mut Device, sub: u32, arg: u32, extra: u32, data: DataBuf<'_>) -> nearflash_core::Done {
    cmd4(dev, sub, arg, extra, 0, data)
}

fn cmd4(dev: &mut Device, sub: u32, arg: u32, cdw12: u32, cdw13: u32, data: DataBuf<'_>) -> nearflash_core::Done {
    let sqe = Sqe { opcode: 0x90, nsid: 1, cdw10: sub, cdw11: arg, cdw12, cdw13, ..Sqe::default() };
    dev.execute(1, sqe, data).unwrap()
}

fn write(dev: &mut Device, lba: u64, data: &[u8]) {
    let n = (data.len() / 4096) as u32;
    let d = dev.execute(1, Sqe::rw(opcode::WRITE, 0, lba, n), DataBuf::ToDevice(data)).unwrap();
    assert!(d.status.is_success(), "{}", d.status);
}

fn flush(dev: &mut Device) {
    assert!(dev.execute(1, Sqe { opcode: opcode::FLUSH, nsid: 1, ..Sqe::default() }, DataBuf::None).unwrap().status.is_success());
}

fn spare(dev: &mut Device, lba: u64) -> [u8; SPARE_BYTES] {
    let mut out = [0u8; SPARE_BYTES];
    assert!(cmd(dev, sub::SPARE, lba as u32, 0, DataBuf::FromDevice(&mut out)).status.is_success());
    out
}

fn ppn_of(dev: &mut Device, lba: u64) -> u32 {
    cmd(dev, sub::PLACE, lba as u32, 0, DataBuf::None).dw0 >> 4
}

fn memory_device() -> Device {
    memory_device_with(&[])
}

fn memory_device_with(overrides: &[(&str, &str)]) -> Device {
    let mut t = tree();
    for (k, v) in overrides {
        t.set(k, v).unwrap();
    }
    attached(Device::memory(t, DeviceOptions::default()).unwrap())
}

fn capacity(dev: &Device) -> u64 {
    dev.extension::<Probe>(NAME).unwrap().capacity
}

#[test]
fn the_registry_builds_the_probe_with_parameters_from_the_preset_and_json() {
    assert!(ext::registered().iter().any(|r| r.name == NAME && r.about.contains("every")));
    let mut t = tree();
    let defaults: toml::Table = toml::from_str(&ProbeParams::section_toml()).unwrap();
    t.insert_default_section("ext.probe", defaults).unwrap();
    t.set("ext.probe.pe_clock", "400MHz").unwrap();
    let mut dev = Device::memory(t, DeviceOptions::default()).unwrap();
    let p = from_registry(&dev, serde_json::json!({ "mailbox_lbas": 8, "sum_instructions_per_byte": 3 }));
    dev.attach(p).unwrap();
    let probe = dev.extension::<Probe>(NAME).unwrap();
    assert_eq!((probe.p.pe_clock, probe.p.mailbox_lbas, probe.p.sum_instructions_per_byte), (400e6, 8, 3.0));
    assert_eq!((probe.p.opcode, probe.p.pe_energy), (0x90, 1.0), "defaults where neither sets them");
    assert_eq!(dev.namespace().lbas, probe.capacity + 8, "the mailbox is advertised");
    // Bad parameters fail at build, naming the parameter; an unknown name is not silently ignored.
    for (bad, what) in [
        (serde_json::json!({ "mailbox_lbas": 0 }), "mailbox_lbas"),
        (serde_json::json!({ "mailbox_lbas": 2.5 }), "mailbox_lbas"),
        (serde_json::json!({ "opcode": 0x10 }), "opcode"),
        (serde_json::json!({ "pe_clok": 1 }), "pe_clok"),
        (serde_json::json!([1, 2]), "object"),
    ] {
        let e = ext::build(NAME, &bad, dev.config()).err().expect("refused").to_string();
        assert!(e.contains(what), "{bad}: {e}");
    }
    let mut wrong_unit = tree();
    wrong_unit.insert_default_section("ext.probe", toml::from_str(&ProbeParams::section_toml()).unwrap()).unwrap();
    assert!(wrong_unit.set("ext.probe.pe_clock", "4ns").is_err(), "the preset's units are checked");
    let e = ext::build("no-such-extension", &serde_json::Value::Null, dev.config()).err().unwrap().to_string();
    assert!(e.contains("probe"), "the error lists what is registered: {e}");
    // Without a reserved area the probe refuses to attach, and the device is left as it was.
    let mut t = tree();
    t.set("ext_reserved_blocks", "0").unwrap();
    let mut bare = Device::memory(t, DeviceOptions::default()).unwrap();
    let p = from_registry(&bare, serde_json::Value::Null);
    assert!(bare.attach(p).unwrap_err().to_string().contains("ext_reserved_blocks"));
    assert!(bare.extensions().is_empty());
}

#[test]
fn physical_program_read_and_erase_in_the_reserved_area() {
    let mut dev = memory_device();
    let page = dev.config().nand.page_size.0 as usize;
    let data: Vec<u8> = (0..page).map(|i| (i * 7 % 253) as u8).collect();
    let p = cmd(&mut dev, sub::PROGRAM, 0, 0, DataBuf::ToDevice(&data));
    assert!(p.status.is_success(), "{}", p.status);
    let ppn = u64::from(p.dw0);
    let mut back = vec![0u8; page];
    let r = cmd(&mut dev, sub::READ_PAGE, ppn as u32, 0, DataBuf::FromDevice(&mut back));
    assert_eq!((r.status, r.dw0), (Status::SUCCESS, 0));
    assert_eq!(back, data);
    let mut spare = vec![0u8; 4 * SPARE_BYTES];
    let s = cmd(&mut dev, sub::PAGE_SPARE, ppn as u32, 0, DataBuf::FromDevice(&mut spare));
    assert_eq!(s.dw0 as usize, spare.len());
    assert_eq!(&spare[..SPARE_BYTES], &data[..SPARE_BYTES], "the spare bytes programmed with the page");
    // NAND rules: a programmed page is not programmed again, pages go in order, the FTL's blocks are not ours.
    assert_eq!(cmd(&mut dev, sub::PROGRAM, 0, 0, DataBuf::ToDevice(&data)).status, Status::INVALID_FIELD);
    assert_eq!(cmd(&mut dev, sub::PROGRAM, 0, 5, DataBuf::ToDevice(&data)).status, Status::INVALID_FIELD);
    assert_eq!(cmd(&mut dev, sub::PROGRAM, 1 << 20, 0, DataBuf::ToDevice(&data)).status, Status::LBA_OUT_OF_RANGE);
    let beyond = dev.config().physical_pages() as u32;
    assert_eq!(cmd(&mut dev, sub::READ_PAGE, beyond, 0, DataBuf::FromDevice(&mut back)).status, Status::LBA_OUT_OF_RANGE);
    assert_eq!(cmd(&mut dev, sub::SENSE, beyond, 0, DataBuf::None).status, Status::LBA_OUT_OF_RANGE);
    assert_eq!(cmd(&mut dev, sub::PAGE_SPARE, beyond, 0, DataBuf::FromDevice(&mut spare)).status, Status::LBA_OUT_OF_RANGE);
    let e = cmd(&mut dev, sub::ERASE, 0, 0, DataBuf::None);
    assert!(e.status.is_success());
    assert!(e.latency_ns >= dev.config().nand.t_erase.0, "an erase takes tBERS");
    let past = cmd(&mut dev, sub::ERASE, 1 << 20, 0, DataBuf::None);
    assert_eq!(past.status, Status::LBA_OUT_OF_RANGE);
    assert!(dev.error_reason(1, past.cid).is_some_and(|r| r.contains("per plane")), "the firmware's own reason");
    assert!(cmd(&mut dev, sub::READ_PAGE, ppn as u32, 0, DataBuf::FromDevice(&mut back)).status.is_success());
    assert!(back.iter().all(|&b| b == 0), "an erased page reads as zeroes");
    assert!(cmd(&mut dev, sub::PROGRAM, 0, 0, DataBuf::ToDevice(&data[..100])).status.is_success());
    // Nothing the extension did is visible to the host's namespace.
    dev.check_consistency().unwrap();
}

#[test]
fn physical_reads_report_the_ecc_outcome_and_refuse_uncorrectable_data() {
    let mut dev = memory_device();
    let data = vec![0x5Au8; 4 * 4096];
    write(&mut dev, 0, &data);
    flush(&mut dev);
    let ppn = ppn_of(&mut dev, 0);
    let mut page = vec![0u8; 16384];
    assert_eq!(cmd(&mut dev, sub::READ_PAGE, ppn, 0, DataBuf::FromDevice(&mut page)).dw0, 0);
    assert_eq!(&page[..4096], &data[..4096]);
    let ecc = &dev.config().ecc;
    let (hard, soft) = (ecc.correctable_bits.0 as u32, ecc.soft_correctable_bits.0 as u32);
    dev.inject_errors(0, hard + 2).unwrap();
    let r = cmd(&mut dev, sub::READ_PAGE, ppn, 0, DataBuf::FromDevice(&mut page));
    assert!(r.status.is_success() && (1..100).contains(&r.dw0), "read retries expected, got {}", r.dw0);
    dev.inject_errors(1, soft * 1000).unwrap();
    let r = cmd(&mut dev, sub::READ_PAGE, ppn, 0, DataBuf::FromDevice(&mut page));
    assert_eq!(r.status, Status::UNRECOVERED_READ_ERROR);
    assert!(page.iter().all(|&b| b == 0), "no data is returned from an uncorrectable page");
    assert!(dev.report().media_errors >= 1);
    let why = dev.error_reason(1, r.cid).unwrap();
    assert!(why.contains("probe") && why.contains("sub-command 0"), "the catch-all reason: {why}");
}

#[test]
fn logical_reads_sum_copy_and_column_reads_return_the_stored_bytes() {
    let mut dev = memory_device();
    let data: Vec<u8> = (0..16 * 4096).map(|i| (i * 31 % 251) as u8).collect();
    write(&mut dev, 0, &data);
    flush(&mut dev);
    let want: u64 = data[4096..12 * 4096].iter().map(|&b| u64::from(b)).sum();
    let mut out = [0u8; 8];
    let on_core = cmd4(&mut dev, sub::SUM, 1, 11, 0, DataBuf::FromDevice(&mut out));
    assert!(on_core.status.is_success());
    assert_eq!(u64::from_le_bytes(out), want);
    let on_pe = cmd4(&mut dev, sub::SUM, 1, 11, 1, DataBuf::FromDevice(&mut out));
    assert_eq!((on_pe.status, u64::from_le_bytes(out)), (Status::SUCCESS, want), "the PE reads the same bytes");
    assert!(on_core.latency_ns != on_pe.latency_ns, "two paths, two costs");
    let bad = cmd4(&mut dev, sub::SUM, 1, 0, 0, DataBuf::FromDevice(&mut out));
    assert_eq!(bad.status, Status::INVALID_FIELD);
    assert!(dev.error_reason(1, bad.cid).unwrap().contains("sum of 0 blocks"));
    let lbas = capacity(&dev);
    assert_eq!(cmd4(&mut dev, sub::SUM, lbas as u32, 1, 0, DataBuf::FromDevice(&mut out)).status, Status::LBA_OUT_OF_RANGE);
    // COPY: inside the device, read back through the host path.
    assert!(cmd4(&mut dev, sub::COPY, 2, 3, 100, DataBuf::None).status.is_success());
    let mut back = vec![0u8; 3 * 4096];
    assert!(dev.execute(1, Sqe::rw(opcode::READ, 0, 100, 3), DataBuf::FromDevice(&mut back)).unwrap().status.is_success());
    assert_eq!(back, data[2 * 4096..5 * 4096]);
    assert_eq!(cmd4(&mut dev, sub::COPY, 0, 1, lbas as u32, DataBuf::None).status, Status::INVALID_FIELD);
    // A lost source block (flash_read_reporting): the copy is refused naming it, and the destination is unchanged.
    let soft = dev.config().ecc.soft_correctable_bits.0 as u32;
    dev.inject_errors(3, soft * 1000).unwrap();
    let lost = cmd4(&mut dev, sub::COPY, 2, 3, 200, DataBuf::None);
    assert_eq!(lost.status, Status::UNRECOVERED_READ_ERROR);
    assert_eq!(dev.error_reason(1, lost.cid).as_deref(), Some("copy source LBAs 2-3 are lost"), "the lost page's part");
    let mut dest = vec![0u8; 3 * 4096];
    assert!(dev.execute(1, Sqe::rw(opcode::READ, 0, 200, 3), DataBuf::FromDevice(&mut dest)).unwrap().status.is_success());
    assert!(dest.iter().all(|&b| b == 0), "nothing was written");
    // COLUMN: a range of a physical page; only its codewords cross the channel.
    let ppn = ppn_of(&mut dev, 4);
    let mut range = vec![0u8; 100];
    let c = cmd4(&mut dev, sub::COLUMN, ppn, 10, 100, DataBuf::FromDevice(&mut range));
    assert!(c.status.is_success());
    let slot = (cmd(&mut dev, sub::PLACE, 4, 0, DataBuf::None).dw0 & 0xF) as usize;
    assert_eq!(range, data[(4 - slot) * 4096 + 10..(4 - slot) * 4096 + 110]);
    assert!(c.dw0 >= 1 && u64::from(c.dw0) < 16384 / dev.config().ecc.codeword_size.0, "{} codewords moved", c.dw0);
    assert_eq!(cmd4(&mut dev, sub::COLUMN, ppn, 16380, 100, DataBuf::FromDevice(&mut range)).status, Status::INVALID_FIELD);
}

#[test]
fn work_after_an_extensions_read_follows_the_data_when_queued_reads_delay_it() {
    // A SUM on a slow PE (10 MHz: 4.5 ms for 11 blocks) reads blocks that four host Reads queued just before it also
    // read: on their dies its data lands after theirs, later than its unloaded forecast. Its PE pass follows that
    // real landing (`ExecCtx::complete_after`), so the delay adds to its latency; booked at the forecast, the pass
    // would hide the delay (the command completing at the later of the pass and its data, 4.5 ms vs < 1 ms).
    let mut dev = Device::memory(tree(), DeviceOptions::default()).unwrap();
    let probe = from_registry(&dev, serde_json::json!({ "pe_clock": 10 }));
    dev.attach(probe).unwrap();
    dev.create_queue_pair(1, 64).unwrap();
    dev.create_queue_pair(2, 64).unwrap();
    let data: Vec<u8> = (0..16 * 4096).map(|i| (i * 7 % 253) as u8).collect();
    write(&mut dev, 0, &data);
    flush(&mut dev);
    dev.advance_to(dev.now() + 100_000_000);
    let mut out = [0u8; 8];
    let alone = cmd4(&mut dev, sub::SUM, 1, 11, 1, DataBuf::FromDevice(&mut out));
    let mut bufs = vec![vec![0u8; 11 * 4096]; 4];
    let t0 = dev.now();
    for (i, b) in bufs.iter_mut().enumerate() {
        dev.submit(2, Sqe::rw(opcode::READ, i as u16, 1, 11), DataBuf::FromDevice(b)).unwrap();
    }
    dev.advance_to(t0 + 50_000); // the Reads' transactions are in their dies' queues
    let sqe = Sqe { opcode: 0x90, nsid: 1, cdw10: sub::SUM, cdw11: 1, cdw12: 11, cdw13: 1, ..Sqe::default() };
    dev.submit(1, sqe, DataBuf::FromDevice(&mut out)).unwrap();
    let reads: Vec<u64> = (0..4).map(|_| dev.wait(2).unwrap().time - t0).collect();
    let sum = dev.wait(1).unwrap();
    assert!(sum.cqe.status().is_success() && alone.status.is_success());
    let loaded = sum.time - (t0 + 50_000);
    // The SUM's flash work is the probe's class, which takes turns with the Reads' (medium) on the dies: its pages
    // wait at least for what was left of the first Read when it arrived; half of that (the rest covers the Read's
    // DRAM, link and completion) is a lower bound on the delay its latency must show.
    assert!(loaded >= alone.latency_ns + (reads[0] - 50_000) / 2, "loaded {loaded} ns vs alone {} ns; Reads done at {reads:?} ns", alone.latency_ns);
}

#[test]
fn annotated_spare_bytes_replace_the_tag_on_the_current_copy() {
    let mut dev = memory_device();
    assert!(cmd(&mut dev, sub::WRITE_TAGGED, 5, 0, DataBuf::ToDevice(&[5u8; 4096])).status.is_success());
    let buffered = cmd(&mut dev, sub::ANNOTATE, 5, 0, DataBuf::None);
    assert!(buffered.status.is_success());
    assert_eq!(spare(&mut dev, 5), tag(!5), "annotated while still in an open page");
    flush(&mut dev);
    let programmed = cmd(&mut dev, sub::ANNOTATE, 5, 0, DataBuf::None);
    assert!(programmed.status.is_success());
    assert!(programmed.latency_ns > buffered.latency_ns, "a programmed page costs a (partial) page program");
    let spp = dev.config().nand.page_size.0 / 4096;
    assert_eq!(u64::from(programmed.dw0) / spp, u64::from(ppn_of(&mut dev, 5)), "the sector address names the copy");
    let unmapped = cmd(&mut dev, sub::ANNOTATE, 6, 0, DataBuf::None);
    assert_eq!(unmapped.status, Status::INVALID_FIELD);
    assert!(dev.error_reason(1, unmapped.cid).unwrap().contains("unmapped"));
    let unknown = cmd(&mut dev, 99, 0, 0, DataBuf::None);
    assert_eq!(unknown.status, Status::INVALID_FIELD);
    assert!(dev.error_reason(1, unknown.cid).unwrap().contains("sub-command 99"));
}

#[test]
fn spare_bytes_are_written_with_the_data_and_survive_gc() {
    // FIFO victims: the oldest blocks (holding the tagged sectors) are collected even while they hold valid data.
    let mut dev = memory_device_with(&[("gc_policy", "fifo")]);
    let lbas = capacity(&dev);
    let tagged: Vec<u64> = (0..32).map(|i| i * 3).collect();
    for &l in &tagged {
        assert!(cmd(&mut dev, sub::WRITE_TAGGED, l as u32, 0, DataBuf::ToDevice(&vec![l as u8; 4096])).status.is_success());
    }
    assert_eq!(spare(&mut dev, 3), tag(3), "readable while still buffered");
    flush(&mut dev);
    let before: Vec<u32> = tagged.iter().map(|&l| ppn_of(&mut dev, l)).collect();
    // Overwrite everything else several times: GC moves the tagged sectors.
    let filler = vec![1u8; 4096 * 8];
    let groups: Vec<u64> = (0..lbas / 8).map(|g| g * 8).filter(|l| !tagged.iter().any(|t| (*l..l + 8).contains(t))).collect();
    for round in 0..6usize {
        // The tagged sectors' neighbours too, so that their pages' blocks become GC's victims.
        for l in (0..96u64).filter(|l| !tagged.contains(l)) {
            write(&mut dev, l, &filler[..4096]);
        }
        for k in 0..groups.len() {
            write(&mut dev, groups[(k * 7 + round) % groups.len()], &filler);
        }
    }
    flush(&mut dev);
    let after: Vec<u32> = tagged.iter().map(|&l| ppn_of(&mut dev, l)).collect();
    assert!(before.iter().zip(&after).any(|(a, b)| a != b), "GC should have moved some tagged sectors");
    for &l in &tagged {
        assert_eq!(spare(&mut dev, l), tag(l), "LBA {l}");
        let mut out = vec![0u8; 4096];
        let d = dev.execute(1, Sqe::rw(opcode::READ, 0, l, 1), DataBuf::FromDevice(&mut out)).unwrap();
        assert!(d.status.is_success() && out.iter().all(|&b| b == l as u8));
    }
    let probe = dev.extension::<Probe>(NAME).unwrap();
    assert!(probe.relocated > 0, "on_relocate was told about the moves");
    assert!(probe.observed.iter().any(|e| matches!(e, HostEvent::Write { nlb: 8, .. })));
    assert_eq!(spare(&mut dev, 1), [0; SPARE_BYTES], "untagged sectors carry zeroes");
    dev.check_consistency().unwrap();
}

#[test]
fn spare_bytes_and_extension_state_survive_a_crash_after_flush() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dev");
    let observed;
    {
        let mut dev = attached(Device::create(&path, tree(), DeviceOptions::default()).unwrap());
        for l in 0..10u64 {
            assert!(cmd(&mut dev, sub::WRITE_TAGGED, l as u32, 0, DataBuf::ToDevice(&vec![9u8; 4096])).status.is_success());
        }
        write(&mut dev, 100, &[3u8; 4096]);
        flush(&mut dev);
        observed = dev.extension::<Probe>(NAME).unwrap().observed.len();
        // Dropped without close: the image stays marked unclean, as after kill -9.
    }
    let dev = Device::open(&path, DeviceOptions::default()).unwrap();
    assert!(dev.recovery().is_some(), "the open recovered");
    let mut dev = attached(dev);
    assert_eq!(dev.extension::<Probe>(NAME).unwrap().observed.len(), observed, "saved state restored");
    for l in 0..10u64 {
        assert_eq!(spare(&mut dev, l), tag(l));
    }
    dev.close().unwrap();
    // A damaged state file is refused with its name, and nothing is attached.
    let state = path.join("ext").join("probe.state");
    let mut bytes = std::fs::read(&state).unwrap();
    *bytes.last_mut().unwrap() ^= 1;
    std::fs::write(&state, bytes).unwrap();
    let mut dev = Device::open(&path, DeviceOptions::default()).unwrap();
    let p = from_registry(&dev, serde_json::Value::Null);
    let e = dev.attach(p).unwrap_err().to_string();
    assert!(e.contains("probe.state") && e.contains("checksum"), "{e}");
    assert!(dev.extensions().is_empty());
}

#[test]
fn intercepted_reads_and_hyper_address_writes_reach_the_probe() {
    let mut dev = memory_device();
    let cap = capacity(&dev);
    write(&mut dev, 0, &[7u8; 4096]);
    // A flagged read is the probe's, served as an ordinary read and counted as one.
    dev.reset_stats();
    let mut out = vec![0u8; 4096];
    let flagged = Sqe { cdw12: 1 << 20, ..Sqe::rw(opcode::READ, 0, 0, 1) };
    assert!(dev.execute(1, flagged, DataBuf::FromDevice(&mut out)).unwrap().status.is_success());
    assert!(out.iter().all(|&b| b == 7));
    let r = dev.report();
    assert_eq!(r.extensions[NAME]["flagged_reads"], 1);
    assert_eq!(r.ops.get("read").map(|o| o.count), Some(1), "accounted as a read");
    // A write past the FTL's capacity lands in the mailbox; the FTL never sees it.
    let d = dev.execute(1, Sqe::rw(opcode::WRITE, 0, cap + 3, 1), DataBuf::ToDevice(&[0xEE; 4096])).unwrap();
    assert_eq!((d.status, d.dw0), (Status::SUCCESS, 3));
    assert_eq!(dev.extension::<Probe>(NAME).unwrap().mailbox, vec![0xEE; 4096]);
    let beyond = dev.namespace().lbas;
    assert_eq!(dev.execute(1, Sqe::rw(opcode::READ, 0, beyond, 1), DataBuf::FromDevice(&mut out)).unwrap().status, Status::LBA_OUT_OF_RANGE);
    dev.check_consistency().unwrap();
}

#[test]
fn overlapping_intercepts_and_opcodes_are_refused_at_attach_and_change_nothing() {
    let mut dev = memory_device();
    struct Other(Vec<Intercept>, Option<u8>);
    impl Extension for Other {
        fn name(&self) -> &str {
            "other"
        }
        fn attach(&mut self, ctx: &mut AttachCtx<'_>) -> nearflash_core::Result<()> {
            ctx.add_units(&UnitSpec { name: "other.u".into(), count: 1, freq_hz: 1e9, pj_per_cycle: 0.0, static_mw: 0.0 })?;
            if let Some(op) = self.1 {
                ctx.claim_opcode(op)?;
            }
            for r in &self.0 {
                ctx.intercept(*r)?;
            }
            Ok(())
        }
        fn execute(&mut self, ctx: &mut ExecCtx<'_>, _: &Sqe, _: DataBuf<'_>) -> ExtCompletion {
            ExtCompletion::ok(ctx.start)
        }
    }
    let refused = [
        Other(vec![Intercept::Opcode(opcode::READ)], None),
        Other(vec![Intercept::LbaFrom { opcode: opcode::READ, first_lba: 1 << 20 }], None),
        Other(vec![Intercept::LbaFrom { opcode: opcode::WRITE, first_lba: 1 << 20 }], None),
        Other(vec![Intercept::Flag { opcode: opcode::READ, dword: 12, mask: 0b11 << 19 }], None),
        Other(vec![], Some(0x90)),
        Other(vec![Intercept::Opcode(0x95)], None),
        Other(vec![Intercept::Flag { opcode: opcode::WRITE, dword: 3, mask: 1 }], None),
    ];
    for o in refused {
        let what = format!("{:?} {:?}", o.0, o.1);
        assert!(dev.attach(Box::new(o)).is_err(), "{what} should be refused");
        assert_eq!(dev.extensions(), vec![NAME.to_string()]);
    }
    // Disjoint rules attach (and the unit name declared by the refused attempts was never kept).
    let ok = Other(vec![Intercept::Flag { opcode: opcode::READ, dword: 12, mask: 1 << 21 }, Intercept::Opcode(opcode::DSM)], Some(0x91));
    dev.attach(Box::new(ok)).unwrap();
    // A flagged read goes to the probe, a plain read to the FTL.
    let flagged = Sqe { cdw12: 1 << 20, ..Sqe::rw(opcode::READ, 0, 0, 1) };
    assert!(dev.execute(1, flagged, DataBuf::None).unwrap().status.is_success());
    assert!(dev.execute(1, Sqe::rw(opcode::READ, 0, 0, 1), DataBuf::None).unwrap().status.is_success());
    assert_eq!(dev.extension::<Probe>(NAME).unwrap().flagged_reads, 1);
}

#[test]
fn exec_and_host_contexts_book_time_and_energy() {
    let mut dev = memory_device();
    let c = cmd(&mut dev, sub::COMPUTE, 0, 0, DataBuf::None);
    assert!(c.status.is_success() && c.dw0 < 1000);
    let cycles_ns = (1e6 / dev.config().host.cpu_freq.0 * 1e9) as u64;
    assert!(c.latency_ns > cycles_ns, "host compute is on the command's path");
    let s = cmd(&mut dev, sub::SENSE, 0, 800, DataBuf::None);
    assert!(s.status.is_success());
    // Multi-plane sensing beside the die: the sum of the sibling pages' bytes (a written page and erased ones).
    write(&mut dev, 0, &[1u8; 4 * 4096]);
    flush(&mut dev);
    let ppn = ppn_of(&mut dev, 0);
    let m = cmd(&mut dev, sub::SENSE_PLANES, ppn, 512, DataBuf::None);
    assert_eq!((m.status, m.dw0), (Status::SUCCESS, 4 * 4096));
    let r = dev.report();
    assert!(r.energy.dynamic_j["probe.extra"] > 4e-6);
    assert!(r.energy.dynamic_j["probe.pe"] > 0.0 && r.energy.static_j.contains_key("probe.pe"));
    assert!(r.utilisation.iter().any(|u| u.name == "probe.pe" && u.ops > 0));
    // Same seed, same extension stream; its own stream, so other consumers do not shift it.
    let mut again = memory_device();
    assert_eq!(cmd(&mut again, sub::COMPUTE, 0, 0, DataBuf::None).dw0, c.dw0);
    // The host side (a host library's baseline): 4 MB added up at 1 cycle per byte.
    let mut h = dev.host();
    let (hz, cores, start) = (h.cpu_hz(), u64::from(h.cores()), h.now());
    let (one, all, link_ns) = host_sum(&mut h, 4_000_000, 1.0);
    let alone_ns = (4e6 / hz * 1e9) as u64;
    assert!(one >= start + alone_ns, "one core: at least the cycles' time");
    assert!(all >= start + alone_ns / cores, "spread over {cores} cores: {all}");
    assert!(link_ns > 0.0);
    let r = dev.report();
    assert!(r.energy.dynamic_j["probe.host_accelerator"] > 0.0);
    assert!(dev.horizon() >= one);
}

/// The public calls of `ExecCtx`, `AttachCtx` and `HostCtx` (read from their sources) against the calls this file
/// makes on a parameter of each type: a context call no example exercises fails here, so that this file stays the
/// complete example the docs promise.
#[test]
fn every_context_call_is_exercised() {
    use syn::visit::Visit;
    let core = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let parse = |rel: &str| syn::parse_file(&std::fs::read_to_string(core.join(rel)).unwrap()).unwrap();
    const CONTEXTS: [&str; 3] = ["ExecCtx", "AttachCtx", "HostCtx"];
    let last_ident = |ty: &syn::Type| -> Option<String> {
        let mut ty = ty;
        while let syn::Type::Reference(r) = ty {
            ty = &r.elem;
        }
        match ty {
            syn::Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
            _ => None,
        }
    };
    // The contexts' public calls.
    let mut public: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> = Default::default();
    for file in ["src/device/exec.rs", "src/device/ext.rs", "src/device/host_ctx.rs"] {
        for item in parse(file).items {
            let syn::Item::Impl(imp) = item else { continue };
            let Some(ctx) = last_ident(&imp.self_ty).filter(|n| CONTEXTS.contains(&n.as_str())) else { continue };
            for f in imp.items {
                if let syn::ImplItem::Fn(f) = f {
                    if matches!(f.vis, syn::Visibility::Public(_)) {
                        public.entry(ctx.clone()).or_default().insert(f.sig.ident.to_string());
                    }
                }
            }
        }
    }
    assert_eq!(public.len(), 3, "all three contexts found: {public:?}");
    // The calls this example makes on a parameter of each context type.
    struct Calls {
        params: Vec<(String, String)>,
        made: std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
    }
    impl<'a> Visit<'a> for Calls {
        fn visit_expr_method_call(&mut self, call: &'a syn::ExprMethodCall) {
            if let syn::Expr::Path(p) = &*call.receiver {
                if let Some(id) = p.path.get_ident() {
                    for (name, ctx) in &self.params {
                        if id == name {
                            self.made.entry(ctx.clone()).or_default().insert(call.method.to_string());
                        }
                    }
                }
            }
            syn::visit::visit_expr_method_call(self, call);
        }
        fn visit_signature(&mut self, sig: &'a syn::Signature) {
            self.params.clear();
            for input in &sig.inputs {
                let syn::FnArg::Typed(t) = input else { continue };
                let (syn::Pat::Ident(id), syn::Type::Reference(r)) = (&*t.pat, &*t.ty) else { continue };
                if let syn::Type::Path(p) = &*r.elem {
                    let ty = p.path.segments.last().unwrap().ident.to_string();
                    if CONTEXTS.contains(&ty.as_str()) {
                        self.params.push((id.ident.to_string(), ty));
                    }
                }
            }
        }
    }
    let mut calls = Calls { params: Vec::new(), made: Default::default() };
    calls.visit_file(&parse("tests/example_extension.rs"));
    let mut missing = Vec::new();
    for (ctx, fns) in &public {
        let made = calls.made.get(ctx).cloned().unwrap_or_default();
        missing.extend(fns.difference(&made).map(|f| format!("{ctx}::{f}")));
    }
    assert!(missing.is_empty(), "the example extension never calls {missing:?}: exercise them in tests/example_extension.rs");
}
