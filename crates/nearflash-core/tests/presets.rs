//! The shipped device presets against their sources: every quantity a paper (or NVMeVirt's `ssd_config.h`) states,
//! directly or as arithmetic on its parameters, is derived from the loaded preset and compared with the stated
//! figure. A last test keeps `docs/presets.md` in step with the limits the presets imply.

use nearflash_core::config::{load_preset, DeviceConfig};

const MB: f64 = 1e6;
const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const GIB: u64 = 1024 * MIB;

fn device(name: &str) -> DeviceConfig {
    device_with(name, &[])
}

/// Loads a preset, applies `key=value` overrides and validates the result.
fn device_with(name: &str, overrides: &[(&str, &str)]) -> DeviceConfig {
    let mut tree = load_preset(name).unwrap_or_else(|e| panic!("{name}: {e}"));
    for (key, value) in overrides {
        tree.set(key, value).unwrap_or_else(|e| panic!("{name} {key}={value}: {e}"));
    }
    DeviceConfig::from_tree(&tree).unwrap_or_else(|e| panic!("{name} {overrides:?}: {e}"))
}

fn assert_close(what: &str, actual: f64, expected: f64, rel_tol: f64) {
    let err = (actual - expected).abs() / expected.abs();
    assert!(
        err <= rel_tol,
        "{what}: got {actual}, source states {expected} (off by {:.2}%, allowed {:.2}%)",
        err * 100.0,
        rel_tol * 100.0
    );
}

/// Seconds a controller core spends on `instructions`.
fn core_seconds(cfg: &DeviceConfig, instructions: f64) -> f64 {
    instructions * cfg.controller.cpi.0 / cfg.controller.core_freq.0
}

/// The headline limits a configuration implies, in bytes and bytes per second.
struct Limits {
    /// channels x channel bus bandwidth.
    internal_read: f64,
    /// dies x planes per operation x page / tR: how fast the dies can sense pages.
    die_read: f64,
    /// dies x planes per operation x page / tPROG.
    die_program: f64,
    link: f64,
    /// Channel time to move one page off the die.
    page_transfer_s: f64,
    raw_bytes: u64,
    logical_bytes: u64,
}

impl Limits {
    fn of(cfg: &DeviceConfig) -> Self {
        let n = &cfg.nand;
        let planes_per_op = if n.multi_plane.0 { n.planes_per_die.0 } else { 1 };
        let bytes_per_op = (cfg.dies() * planes_per_op * n.page_size.0) as f64;
        let channel = cfg.channel_bandwidth().0;
        Limits {
            internal_read: n.channels.0 as f64 * channel,
            die_read: bytes_per_op / (n.t_read.0 as f64 * 1e-9),
            die_program: bytes_per_op / (n.t_prog.0 as f64 * 1e-9),
            link: cfg.link_bandwidth().0,
            page_transfer_s: n.page_size.0 as f64 / channel,
            raw_bytes: cfg.physical_pages() * n.page_size.0,
            logical_bytes: cfg.logical_bytes(),
        }
    }

    /// The sequential read bound a host sees: the slowest of dies, channels and link.
    fn read_bound(&self) -> f64 {
        self.internal_read.min(self.die_read).min(self.link)
    }

    /// The markdown table docs/presets.md carries for a preset.
    fn table(&self, cfg: &DeviceConfig) -> String {
        let n = &cfg.nand;
        let mbs = |b: f64| format!("{:.0} MB/s", b / MB);
        let gib = |b: u64| format!("{:.1} GiB", b as f64 / GIB as f64);
        let rows = [
            (
                "channels x ways x dies x planes",
                format!(
                    "{} x {} x {} x {}",
                    n.channels.0, n.chips_per_channel.0, n.dies_per_chip.0, n.planes_per_die.0
                ),
            ),
            ("dies (LUNs) / planes", format!("{} / {}", cfg.dies(), cfg.planes())),
            ("page / block", format!("{} KiB / {} pages", n.page_size.0 / KIB, n.pages_per_block.0)),
            ("raw / logical capacity", format!("{} / {}", gib(self.raw_bytes), gib(self.logical_bytes))),
            ("tR / tPROG", format!("{} us / {} us", micros(n.t_read.0), micros(n.t_prog.0))),
            (
                "channel rate (page transfer)",
                format!("{} ({:.1} us)", mbs(cfg.channel_bandwidth().0), self.page_transfer_s * 1e6),
            ),
            ("host link", format!("{} ({})", mbs(self.link), cfg.host.interface.0)),
            ("internal read = channels x channel rate", mbs(self.internal_read)),
            ("die-limited read = dies x planes x page / tR", mbs(self.die_read)),
            ("die-limited program = dies x planes x page / tPROG", mbs(self.die_program)),
            ("sequential read bound = min(internal, die, link)", mbs(self.read_bound())),
        ];
        let mut out = String::from("| quantity | value |\n|---|---|\n");
        for (k, v) in rows {
            out.push_str(&format!("| {k} | {v} |\n"));
        }
        out
    }
}

/// Nanoseconds as microseconds without trailing zeros.
fn micros(ns: u64) -> String {
    let s = format!("{:.3}", ns as f64 / 1e3);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[test]
fn nice_matches_the_prototype_of_sec_iv_e() {
    let cfg = device("nice-zu7eg");
    let lim = Limits::of(&cfg);
    assert_eq!(cfg.nand.page_size.0, 4 * KIB, "Sec. IV-A: 4KB flash page");
    assert!(cfg.nand.oob_size.0 > 400, "Sec. IV-A: more than 400 bytes of OOB per 4KB page");
    assert_eq!(cfg.bits_per_cell(), 2, "Sec. IV-E: MLC NAND");
    assert_close("raw capacity (512GB MLC)", lim.raw_bytes as f64, 512e9, 0.075);
    assert_eq!(cfg.controller.dram_size.0, 8 * GIB, "Sec. IV-E: 8GB DDR4");
    assert_eq!(cfg.ftl.sector_size.0 * 64, 256 * KIB, "Sec. V-A: 64 blocks = 256KB");
    // PCIe 3.0 x8: more than four lanes could carry, at most what eight carry (984.6 MB/s each).
    let lane = 8e9 * 128.0 / 130.0 / 8.0;
    assert!(lim.link > 4.0 * lane && lim.link <= 8.0 * lane, "Sec. IV-E: PCIe 3.0 x8, got {} MB/s", lim.link / MB);
    assert!(cfg.nvme.max_queues.0 >= 16, "Sec. V-A: the 16T16Q benchmark needs 16 queues");
    assert!(cfg.nvme.mdts.0 >= 256 * KIB, "Sec. V-A: 256KB reads");
}

#[test]
fn searssd_has_the_geometry_of_sec_iv_c() {
    let cfg = device("searssd");
    let lim = Limits::of(&cfg);
    assert_eq!(cfg.dies(), 256, "32 channels x 4 chips x 2 LUNs");
    assert_eq!(cfg.planes(), 512, "32 channels x 4 chips x 4 planes");
    assert_eq!(cfg.nand.page_size.0, 16 * KIB);
    assert_eq!(lim.raw_bytes, 512 * GIB, "Sec. IV-C: 512 GB of SiN");
    assert_close("page transfer off-chip (Sec. III: ~30 us)", lim.page_transfer_s, 30e-6, 0.05);
    assert!(cfg.nand.multi_plane.0, "Sec. IV-C: multi-plane reads");
    assert_close("soft-decision decode (Sec. VII-B: ~10 us)", cfg.ecc.t_soft_decode.0 as f64, 10e3, 0.0);
    assert_eq!(cfg.controller.dram_size.0, 4 * GIB, "Sec. VII-A: 4GB SSD DRAM");
    assert_eq!((cfg.host.pcie_gen.0, cfg.host.pcie_lanes.0), (3, 4), "Sec. VII-A: PCIe 3.0 x4");
    assert_close("host clock (Sec. VII-A: 3.1 GHz)", cfg.host.cpu_freq.0, 3.1e9, 1e-12);
}

#[test]
fn issd_matches_table_2_and_fig_9() {
    let cfg = device("issd");
    let lim = Limits::of(&cfg);
    assert_close("r_nand (Table 2)", cfg.channel_bandwidth().0, 400.0 * MB, 1e-12);
    assert_close("raw flash bandwidth at n_ch = 32 (Fig. 9: 12.8 GB/s)", lim.internal_read, 12.8e9, 1e-12);
    assert_close("r_host (Table 2: 600 MB/s SATA)", lim.link, 600.0 * MB, 1e-12);
    assert_close("r_dram (Table 2)", cfg.controller.dram_bandwidth.0, 3.2e9, 1e-12);
    assert_eq!(cfg.controller.cores.0, 4, "Table 2: n_ssd_cpu");
    assert_close("f_ssd_cpu (Table 2)", cfg.controller.core_freq.0, 400e6, 1e-12);
    assert_eq!(cfg.host.cpu_cores.0, 8);
    assert_close("f_host_cpu (Table 2)", cfg.host.cpu_freq.0, 3.2e9, 1e-12);
    assert_eq!(cfg.nand.page_size.0, 8 * KIB, "Fig. 10 energies are per 8 kB page");
    assert_close("E_NAND 8kB read (Fig. 10)", cfg.energy.nand_read_page.0, 3.31e6, 1e-12);
    assert_close("E_NAND 8kB write (Fig. 10)", cfg.energy.nand_program_page.0, 64.94e6, 1e-12);
    assert_close("E_proc (Fig. 10)", cfg.energy.core_per_instruction.0, 192.0, 1e-12);
}

#[test]
fn issd_channel_count_is_a_knob_and_channels_stay_the_limit() {
    for n_ch in (8..=64).step_by(8) {
        let cfg = device_with("issd", &[("nand.channels", &n_ch.to_string())]);
        let lim = Limits::of(&cfg);
        assert_close(&format!("n_ch x r_nand at n_ch = {n_ch}"), lim.internal_read, n_ch as f64 * 400.0 * MB, 1e-12);
        // The model's t_nand2fmc = D / (n_ch x r_nand) assumes the dies behind a channel keep up with it.
        assert!(
            lim.die_read >= 2.0 * lim.internal_read,
            "n_ch = {n_ch}: dies ({} MB/s) would limit the channels",
            lim.die_read / MB
        );
    }
}

#[test]
fn issd_prototype_matches_sec_4_3() {
    let cfg = device("issd-prototype");
    let lim = Limits::of(&cfg);
    assert_close("internal bandwidth (16 x 40 MB/s)", lim.internal_read, 640.0 * MB, 1e-12);
    assert_close("host link (~250 MB/s)", lim.link, 250.0 * MB, 1e-12);
    assert_close("scan speed-up bound (640/250)", lim.internal_read / lim.link, 2.56, 1e-12);
    assert!(lim.die_read > lim.internal_read, "the 40 MB/s FMCs, not the dies, are the limit");
    assert_eq!(cfg.controller.cores.0, 2, "two ARM processors");
    assert_eq!(cfg.controller.dram_size.0, 256 * MIB, "256 MB DRAM");
    assert_eq!(cfg.host.cpu_cores.0, 4, "quad-core host");
    // The page map (4 B per logical sector) must fit the 256 MB DRAM beside the write buffer.
    let map_bytes = cfg.physical_sectors() * 4;
    assert!(map_bytes + cfg.ftl.write_buffer.0 <= cfg.controller.dram_size.0, "map of {map_bytes} B does not fit");
    let parent = device("issd");
    assert_eq!(cfg.nand.page_size, parent.nand.page_size, "inherits the issd geometry");
    assert_eq!(cfg.energy.nand_read_page, parent.energy.nand_read_page, "inherits the Fig. 10 energies");
}

#[test]
fn samsung_970pro_matches_nvmevirt_ssd_config() {
    let cfg = device("samsung-970pro");
    let lim = Limits::of(&cfg);
    assert_close("PCIE_BANDWIDTH 3360 MB/s", lim.link, 3360.0 * MB, 0.01);
    assert_close("NAND_CHANNEL_BANDWIDTH 800 MB/s", cfg.channel_bandwidth().0, 800.0 * MB, 1e-12);
    assert_eq!((cfg.nand.channels.0, cfg.dies(), cfg.planes()), (8, 16, 16), "8 channels x 2 LUNs x 1 plane");
    assert_eq!(cfg.nand.page_size.0, 32 * KIB, "FLASH_PAGE_SIZE");
    assert_eq!(cfg.nand.blocks_per_plane.0, 8192, "BLKS_PER_PLN");
    assert_eq!(lim.raw_bytes, 512 * GIB, "a 512 GB drive");
    assert_eq!(cfg.nand.t_read_lsb.map(|t| t.0), Some(36_013 - 6_000), "NAND_READ_LATENCY_LSB");
    assert_eq!(cfg.nand.t_read_msb.map(|t| t.0), Some(36_013 + 6_000), "NAND_READ_LATENCY_MSB");
    assert_eq!(cfg.nand.t_prog.0, 185_000, "NAND_PROG_LATENCY");
    assert!(!cfg.nand.cache_read.0 && !cfg.nand.multi_plane.0);
    let fw_read = core_seconds(&cfg, cfg.controller.fw_read_instructions.0 + cfg.ftl.map_instructions.0);
    assert_close("FW_4KB_READ_LATENCY 21.5 us", fw_read, 21.5e-6, 1e-9);
    let fw_write = core_seconds(&cfg, cfg.controller.fw_write_instructions.0 + cfg.ftl.map_instructions.0);
    assert_close("FW_WBUF_LATENCY0 + 1 x FW_WBUF_LATENCY1", fw_write, 4.46e-6, 1e-9);
    assert_eq!(cfg.controller.fw_page_instructions.0, 0.0, "FW_CH_XFER_LATENCY 0");
    // OP_AREA_PERCENT 0.07: NVMeVirt exports physical x 100 / 107.
    assert_close("physical / logical", cfg.physical_sectors() as f64 / cfg.logical_sectors() as f64, 1.07, 1e-4);
    assert_eq!(cfg.ftl.write_buffer.0, 8 * 2 * 32 * KIB * 2, "GLOBAL_WB_SIZE");
    assert_eq!(cfg.nvme.mdts.0, (1 << 6) * 4 * KIB, "MDTS 6 in 4 KiB units");
    assert_eq!((cfg.nvme.max_queues.0, cfg.nvme.max_queue_depth.0), (72, 1024), "NR_MAX_IO_QUEUE, MQES + 1");
}

/// Parameters whose source says they are assumed; for an inheriting preset only those it sets itself.
fn assumed_params(name: &str, parent: Option<&str>) -> Vec<String> {
    let docs = load_preset(name).unwrap_or_else(|e| panic!("{name}: {e}")).docs();
    let inherited = parent.map(|p| load_preset(p).unwrap_or_else(|e| panic!("{p}: {e}")).docs()).unwrap_or_default();
    // Extension sections (`ext.*`) are documented with their systems (docs/issd.md, docs/recssd.md).
    docs.into_iter()
        .filter(|d| d.source.contains("assumed") && !inherited.contains(d) && !d.path.starts_with("ext."))
        .map(|d| d.path)
        .collect()
}

#[test]
fn docs_carry_each_presets_limits_and_assumptions() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/presets.md");
    let doc = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let presets = [
        ("cosmos-plus", None),
        ("nice-zu7eg", None),
        ("searssd", None),
        ("issd", None),
        ("issd-prototype", Some("issd")),
        ("samsung-970pro", None),
    ];
    let mut problems = Vec::new();
    for (name, parent) in presets {
        let cfg = device(name);
        let heading = format!("\n## `{name}`");
        let Some(start) = doc.find(&heading) else {
            problems.push(format!("no section {heading:?}"));
            continue;
        };
        let section = &doc[start + heading.len()..];
        let section = &section[..section.find("\n## ").unwrap_or(section.len())];
        let table = Limits::of(&cfg).table(&cfg);
        if !section.contains(&table) {
            problems.push(format!("section {name}: the table must read\n\n{table}"));
        }
        let missing: Vec<String> =
            assumed_params(name, parent).into_iter().filter(|p| !section.contains(&format!("`{p}`"))).collect();
        if !missing.is_empty() {
            problems.push(format!("section {name} does not list the assumed parameters {missing:?}"));
        }
    }
    assert!(problems.is_empty(), "docs/presets.md is out of step with the presets:\n{}", problems.join("\n"));
}

#[test]
fn nice_zu7eg_describes_the_jetson_nx_gpu_and_other_presets_none() {
    let cfg = device("nice-zu7eg");
    let h = &cfg.host;
    assert_eq!(h.gpu_cores.map(|c| c.0), Some(384), "NICE Sec. V-A: 384-core Volta GPU");
    assert_close("GPU clock (NICE Sec. V-C: 1.1 GHz)", h.gpu_freq.unwrap().0, 1.1e9, 1e-12);
    assert_eq!(h.gpu_launch.map(|t| t.0), Some(10_000));
    assert_close("GPU busy power", cfg.energy.host_gpu_active.unwrap().0, 6000.0, 1e-12);
    for name in ["cosmos-plus", "searssd", "issd", "samsung-970pro"] {
        let c = device(name);
        assert!(c.host.gpu_cores.is_none() && c.energy.host_gpu_active.is_none(), "{name}");
    }
    for (key, value) in [("host.gpu_compute_efficiency", "1.5"), ("host.gpu_memory_efficiency", "0"), ("host.gpu_cores", "0"),
        ("host.gpu_freq", "0"), ("host.gpu_ops_per_core_cycle", "-2"), ("energy.host_gpu_active", "-1")]
    {
        let mut tree = load_preset("nice-zu7eg").unwrap();
        tree.set(key, value).unwrap();
        let e = DeviceConfig::from_tree(&tree).expect_err(&format!("{key}={value} must be refused")).to_string();
        assert!(e.contains(key.split('.').next_back().unwrap().split('_').next().unwrap()), "{e}");
    }
}
