//! A small extension that exercises every `ExecCtx`, `AttachCtx` and `HostCtx` call through the device's command
//! interface, as a new system would: physical reads with data and ECC outcome, programs and erases in the reserved
//! area, OOB spare bytes written with data that survive GC and a crash, observed writes, relocations, saved state,
//! and attach-time refusal of overlapping intercepts.

use nearflash_core::config::load_preset;
use nearflash_core::ext::{
    AttachCtx, DataBuf, EccOutcome, ExecCtx, ExtCompletion, Extension, HostEvent, Intercept, Placement, ReadTo, Relocation,
    Sqe, Status, UnitHandle, UnitSpec, SPARE_BYTES,
};
use nearflash_core::nvme::opcode;
use nearflash_core::{Device, DeviceOptions};

const OP: u8 = 0x90;
/// Sub-commands in CDW10.
const READ_PAGE: u32 = 0;
const PROGRAM: u32 = 1;
const ERASE: u32 = 2;
const WRITE_TAGGED: u32 = 3;
const SPARE: u32 = 4;
const PLACE: u32 = 5;
const SENSE: u32 = 6;
const COMPUTE: u32 = 7;

#[derive(Default)]
struct Probe {
    unit: Option<UnitHandle>,
    observed: Vec<HostEvent>,
    relocated: u64,
    flagged_reads: u64,
    intercept: Option<Intercept>,
}

fn probe() -> Box<Probe> {
    Box::new(Probe { intercept: Some(Intercept::Flag { opcode: opcode::READ, dword: 12, mask: 1 << 20 }), ..Probe::default() })
}

impl Probe {
    fn run(&mut self, ctx: &mut ExecCtx<'_>, sqe: &Sqe, data: DataBuf<'_>) -> Result<(u32, u64), Status> {
        let t = ctx.start;
        let arg = sqe.cdw11;
        match sqe.cdw10 {
            READ_PAGE => {
                let DataBuf::FromDevice(out) = data else { return Err(Status::INVALID_FIELD) };
                let r = ctx.read_page(t, u64::from(arg), ReadTo::Dram, out)?;
                let dw0 = match r.ecc {
                    EccOutcome::Corrected => 0,
                    EccOutcome::Retried(n) => n,
                    EccOutcome::SoftDecoded(n) => 100 + n,
                    EccOutcome::Uncorrectable(_) => unreachable!("an uncorrectable read is an error"),
                };
                Ok((dw0, r.done))
            }
            PROGRAM => {
                let DataBuf::ToDevice(src) = data else { return Err(Status::INVALID_FIELD) };
                let block = ctx.reserved_block(u64::from(arg))?;
                let ppn = ctx.geometry().block_first_ppn(block) + u64::from(sqe.cdw12);
                let done = ctx.program_page(t, ppn, src, &src[..SPARE_BYTES.min(src.len())])?;
                Ok((ppn as u32, done))
            }
            ERASE => {
                let block = ctx.reserved_block(u64::from(arg))?;
                Ok((block, ctx.erase_block(t, block)?))
            }
            WRITE_TAGGED => {
                let DataBuf::ToDevice(src) = data else { return Err(Status::INVALID_FIELD) };
                let blocks = src.len() as u64 / ctx.lba_bytes();
                let spare: Vec<u8> = (0..blocks).flat_map(|i| tag(u64::from(arg) + i)).collect();
                Ok((0, ctx.write_lbas_with_spare(t, u64::from(arg), src, &spare)?))
            }
            SPARE => {
                let DataBuf::FromDevice(out) = data else { return Err(Status::INVALID_FIELD) };
                let s = ctx.spare(u64::from(arg))?;
                out[..SPARE_BYTES].copy_from_slice(&s);
                Ok((0, ctx.to_host(t, SPARE_BYTES as u64)))
            }
            PLACE => match ctx.placement(u64::from(arg))? {
                Placement::Flash { addr, slot } => {
                    assert_eq!(ctx.page_addr(addr.ppn)?, addr);
                    Ok(((addr.ppn as u32) << 4 | slot, t))
                }
                Placement::Buffered => Ok((u32::MAX - 1, t)),
                Placement::Unmapped => Ok((u32::MAX, t)),
            },
            SENSE => {
                let r = ctx.sense_page(t, u64::from(arg), 0)?;
                let unit = self.unit.expect("attached");
                let member = r.addr.die % unit.count;
                let done = ctx.compute(r.done, unit, member, f64::from(sqe.cdw12));
                Ok((r.addr.die, done))
            }
            COMPUTE => {
                let fw = ctx.firmware(t, 1000.0);
                let fw = ctx.firmware_on(fw, ctx.controller_cores() - 1, 1000.0);
                let h = ctx.host_compute(fw, 1e6, 1e6, 1);
                ctx.charge("probe.extra", 5e6);
                let x = ctx.from_host(h, 4096);
                use rand::Rng as _;
                let draw: u32 = ctx.rng().gen_range(0..1000);
                Ok((draw, x))
            }
            _ => Err(Status::INVALID_FIELD),
        }
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
        "probe"
    }

    fn attach(&mut self, ctx: &mut AttachCtx<'_>) -> nearflash_core::Result<()> {
        ctx.claim_opcode(OP)?;
        self.unit = Some(ctx.add_units(&UnitSpec {
            name: "probe.pe".into(),
            count: ctx.geometry().dies(),
            freq_hz: 800e6,
            pj_per_cycle: 1.0,
            static_mw: 1.0,
        })?);
        if let Some(rule) = self.intercept {
            ctx.intercept(rule)?;
        }
        ctx.observe();
        ctx.track_relocations();
        assert!(ctx.reserved_blocks_per_plane() > 0);
        assert!(ctx.lbas() > 0, "the FTL's capacity is known at attach");
        Ok(())
    }

    fn execute(&mut self, ctx: &mut ExecCtx<'_>, sqe: &Sqe, data: DataBuf<'_>) -> ExtCompletion {
        if sqe.opcode == opcode::READ {
            self.flagged_reads += 1;
            return ExtCompletion::ok(ctx.start);
        }
        match self.run(ctx, sqe, data) {
            Ok((dw0, done)) => ExtCompletion { status: Status::SUCCESS, dw0, done },
            Err(s) => ExtCompletion::failed(s, ctx.start),
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
}

fn tree() -> nearflash_core::config::ConfigTree {
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

fn cmd(dev: &mut Device, sub: u32, arg: u32, extra: u32, data: DataBuf<'_>) -> nearflash_core::Done {
    let sqe = Sqe { opcode: OP, cdw10: sub, cdw11: arg, cdw12: extra, ..Sqe::default() };
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
    assert!(cmd(dev, SPARE, lba as u32, 0, DataBuf::FromDevice(&mut out)).status.is_success());
    out
}

fn memory_device() -> Device {
    memory_device_with(&[])
}

fn memory_device_with(overrides: &[(&str, &str)]) -> Device {
    let mut t = tree();
    for (k, v) in overrides {
        t.set(k, v).unwrap();
    }
    let mut dev = Device::memory(t, DeviceOptions::default()).unwrap();
    dev.attach(probe()).unwrap();
    dev.create_queue_pair(1, 64).unwrap();
    dev
}

#[test]
fn physical_program_read_and_erase_in_the_reserved_area() {
    let mut dev = memory_device();
    let page = dev.config().nand.page_size.0 as usize;
    let data: Vec<u8> = (0..page).map(|i| (i * 7 % 253) as u8).collect();
    let p = cmd(&mut dev, PROGRAM, 0, 0, DataBuf::ToDevice(&data));
    assert!(p.status.is_success(), "{}", p.status);
    let ppn = u64::from(p.dw0);
    let mut back = vec![0u8; page];
    let r = cmd(&mut dev, READ_PAGE, ppn as u32, 0, DataBuf::FromDevice(&mut back));
    assert_eq!((r.status, r.dw0), (Status::SUCCESS, 0));
    assert_eq!(back, data);
    // NAND rules: a programmed page is not programmed again, pages go in order, the FTL's blocks are not ours.
    assert_eq!(cmd(&mut dev, PROGRAM, 0, 0, DataBuf::ToDevice(&data)).status, Status::INVALID_FIELD);
    assert_eq!(cmd(&mut dev, PROGRAM, 0, 5, DataBuf::ToDevice(&data)).status, Status::INVALID_FIELD);
    assert_eq!(cmd(&mut dev, PROGRAM, 1 << 20, 0, DataBuf::ToDevice(&data)).status, Status::LBA_OUT_OF_RANGE);
    let beyond = dev.config().physical_pages() as u32;
    assert_eq!(cmd(&mut dev, READ_PAGE, beyond, 0, DataBuf::FromDevice(&mut back)).status, Status::LBA_OUT_OF_RANGE);
    assert_eq!(cmd(&mut dev, SENSE, beyond, 0, DataBuf::None).status, Status::LBA_OUT_OF_RANGE);
    let e = cmd(&mut dev, ERASE, 0, 0, DataBuf::None);
    assert!(e.status.is_success());
    assert!(e.latency_ns >= dev.config().nand.t_erase.0, "an erase takes tBERS");
    assert!(cmd(&mut dev, READ_PAGE, ppn as u32, 0, DataBuf::FromDevice(&mut back)).status.is_success());
    assert!(back.iter().all(|&b| b == 0), "an erased page reads as zeroes");
    assert!(cmd(&mut dev, PROGRAM, 0, 0, DataBuf::ToDevice(&data[..100])).status.is_success());
    // Nothing the extension did is visible to the host's namespace.
    dev.check_consistency().unwrap();
}

#[test]
fn physical_reads_report_the_ecc_outcome_and_refuse_uncorrectable_data() {
    let mut dev = memory_device();
    let data = vec![0x5Au8; 4 * 4096];
    write(&mut dev, 0, &data);
    flush(&mut dev);
    let d = cmd(&mut dev, PLACE, 0, 0, DataBuf::None);
    let ppn = d.dw0 >> 4;
    let mut page = vec![0u8; 16384];
    assert_eq!(cmd(&mut dev, READ_PAGE, ppn, 0, DataBuf::FromDevice(&mut page)).dw0, 0);
    assert_eq!(&page[..4096], &data[..4096]);
    let ecc = &dev.config().ecc;
    let (hard, soft) = (ecc.correctable_bits.0 as u32, ecc.soft_correctable_bits.0 as u32);
    dev.inject_errors(0, hard + 2).unwrap();
    let r = cmd(&mut dev, READ_PAGE, ppn, 0, DataBuf::FromDevice(&mut page));
    assert!(r.status.is_success() && (1..100).contains(&r.dw0), "read retries expected, got {}", r.dw0);
    dev.inject_errors(1, soft * 1000).unwrap();
    let r = cmd(&mut dev, READ_PAGE, ppn, 0, DataBuf::FromDevice(&mut page));
    assert_eq!(r.status, Status::UNRECOVERED_READ_ERROR);
    assert!(page.iter().all(|&b| b == 0), "no data is returned from an uncorrectable page");
    assert!(dev.report().media_errors >= 1);
}

#[test]
fn spare_bytes_are_written_with_the_data_and_survive_gc() {
    // FIFO victims: the oldest blocks (holding the tagged sectors) are collected even while they hold valid data.
    let mut dev = memory_device_with(&[("gc_policy", "fifo")]);
    let lbas = dev.namespace().lbas;
    let tagged: Vec<u64> = (0..32).map(|i| i * 3).collect();
    for &l in &tagged {
        assert!(cmd(&mut dev, WRITE_TAGGED, l as u32, 0, DataBuf::ToDevice(&vec![l as u8; 4096])).status.is_success());
    }
    assert_eq!(spare(&mut dev, 3), tag(3), "readable while still buffered");
    flush(&mut dev);
    let before: Vec<u32> = tagged.iter().map(|&l| cmd(&mut dev, PLACE, l as u32, 0, DataBuf::None).dw0).collect();
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
    let after: Vec<u32> = tagged.iter().map(|&l| cmd(&mut dev, PLACE, l as u32, 0, DataBuf::None).dw0).collect();
    assert!(before.iter().zip(&after).any(|(a, b)| a != b), "GC should have moved some tagged sectors");
    for &l in &tagged {
        assert_eq!(spare(&mut dev, l), tag(l), "LBA {l}");
        let mut out = vec![0u8; 4096];
        let d = dev.execute(1, Sqe::rw(opcode::READ, 0, l, 1), DataBuf::FromDevice(&mut out)).unwrap();
        assert!(d.status.is_success() && out.iter().all(|&b| b == l as u8));
    }
    let probe = dev.extension::<Probe>("probe").unwrap();
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
        let mut dev = Device::create(&path, tree(), DeviceOptions::default()).unwrap();
        dev.attach(probe()).unwrap();
        dev.create_queue_pair(1, 64).unwrap();
        for l in 0..10u64 {
            assert!(cmd(&mut dev, WRITE_TAGGED, l as u32, 0, DataBuf::ToDevice(&vec![9u8; 4096])).status.is_success());
        }
        write(&mut dev, 100, &[3u8; 4096]);
        flush(&mut dev);
        observed = dev.extension::<Probe>("probe").unwrap().observed.len();
        // Dropped without close: the image stays marked unclean, as after kill -9.
    }
    let mut dev = Device::open(&path, DeviceOptions::default()).unwrap();
    assert!(dev.recovery().is_some(), "the open recovered");
    dev.attach(probe()).unwrap();
    dev.create_queue_pair(1, 64).unwrap();
    assert_eq!(dev.extension::<Probe>("probe").unwrap().observed.len(), observed, "saved state restored");
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
    let e = dev.attach(probe()).unwrap_err().to_string();
    assert!(e.contains("probe.state") && e.contains("checksum"), "{e}");
    assert!(dev.extensions().is_empty());
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
        Other(vec![Intercept::Flag { opcode: opcode::READ, dword: 12, mask: 0b11 << 19 }], None),
        Other(vec![], Some(OP)),
        Other(vec![Intercept::Opcode(0x95)], None),
        Other(vec![Intercept::Flag { opcode: opcode::WRITE, dword: 3, mask: 1 }], None),
    ];
    for o in refused {
        let what = format!("{:?} {:?}", o.0, o.1);
        assert!(dev.attach(Box::new(o)).is_err(), "{what} should be refused");
        assert_eq!(dev.extensions(), vec!["probe".to_string()]);
    }
    // Disjoint rules attach (and the unit name declared by the refused attempts was never kept).
    let ok = Other(
        vec![
            Intercept::Flag { opcode: opcode::READ, dword: 12, mask: 1 << 21 },
            Intercept::LbaFrom { opcode: opcode::WRITE, first_lba: 1 << 20 },
        ],
        Some(0x91),
    );
    dev.attach(Box::new(ok)).unwrap();
    // A flagged read goes to the probe, a plain read to the FTL.
    let flagged = Sqe { cdw12: 1 << 20, ..Sqe::rw(opcode::READ, 0, 0, 1) };
    assert!(dev.execute(1, flagged, DataBuf::None).unwrap().status.is_success());
    assert!(dev.execute(1, Sqe::rw(opcode::READ, 0, 0, 1), DataBuf::None).unwrap().status.is_success());
    assert_eq!(dev.extension::<Probe>("probe").unwrap().flagged_reads, 1);
}

#[test]
fn exec_and_host_contexts_book_time_and_energy() {
    let mut dev = memory_device();
    let t0 = dev.now();
    let c = cmd(&mut dev, COMPUTE, 0, 0, DataBuf::None);
    assert!(c.status.is_success() && c.dw0 < 1000);
    let cycles_ns = (1e6 / dev.config().host.cpu_freq.0 * 1e9) as u64;
    assert!(c.latency_ns > cycles_ns, "host compute is on the command's path");
    let s = cmd(&mut dev, SENSE, 0, 800, DataBuf::None);
    assert!(s.status.is_success());
    let r = dev.report();
    assert!(r.energy.dynamic_j["probe.extra"] > 4e-6);
    assert!(r.energy.dynamic_j["probe.pe"] > 0.0 && r.energy.static_j.contains_key("probe.pe"));
    assert!(r.utilisation.iter().any(|u| u.name == "probe.pe" && u.ops > 0));
    // Same seed, same extension stream; its own stream, so other consumers do not shift it.
    let mut again = memory_device();
    assert_eq!(cmd(&mut again, COMPUTE, 0, 0, DataBuf::None).dw0, c.dw0);
    // HostCtx.
    let mut h = dev.host();
    let hz = h.cpu_hz();
    assert!(h.cores() >= 1 && h.link_bandwidth() > 0.0);
    let start = h.now().max(t0);
    let one = h.compute(start, hz * 1e-3, 1e6, 1);
    assert!(one >= start + 999_000);
    // 4 ms of work in 100 us slices spreads over every free host core.
    let cores = u64::from(h.cores());
    let sliced = h.compute_sliced(start, hz * 4e-3, 4e6, 2, 100_000.0);
    assert!(sliced >= start + 3_999_000 / cores, "{sliced} {start} {cores}");
    assert!(h.earliest_core_start(start, 1000) >= start);
    assert!(h.dram_traffic(1 << 20) > 0.0);
    h.charge("host_accelerator", 1e6);
    assert!(dev.report().energy.dynamic_j["host_accelerator"] > 0.0);
    assert!(dev.horizon() >= sliced);
}
