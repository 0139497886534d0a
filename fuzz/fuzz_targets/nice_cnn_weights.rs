//! NICE-C's weights file, read from a file on the device: the f32 parameters and the activation-scales section
//! (`quant::ScalesSection`). Raw bytes go to the section parser; then a LeNet-5 weights file made of the input (its
//! bytes repeated as f32 parameters, the input's head as scales under a valid checksum, so that extreme or odd
//! scales reach the 8-bit datapath) is parsed in both precisions and classifies one image made of the input.
//! Nothing may panic or loop.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nearflash_nice::cnn_net::{named, param_count, Classifier, Precision};
use nearflash_nice::quant::{scales_needed, ScalesSection};

const LENET: u8 = 0;

fuzz_target!(|data: &[u8]| {
    if let Some((&n, rest)) = data.split_first() {
        let _ = ScalesSection::parse(rest, usize::from(n));
    }
    if data.len() < 4 {
        return;
    }
    let (input, layers) = named(LENET).expect("LeNet-5 is network 0");
    let params = 4 * param_count(input, &layers).expect("LeNet-5's parameters");
    let mut weights: Vec<u8> = data.iter().copied().cycle().take(params).collect();
    let scales: Vec<f32> = data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .cycle()
        .take(scales_needed(input, &layers).expect("LeNet-5's scales"))
        .collect();
    weights.extend_from_slice(&ScalesSection(scales).to_bytes());
    let image: Vec<u8> = data.iter().copied().rev().cycle().take(input.0 * input.1 * input.2).collect();
    for precision in [Precision::Int8, Precision::F32] {
        if let Ok(c) = Classifier::new(LENET, &weights, precision) {
            let _ = c.run(&image);
        }
    }
    // A file cut inside the section, and one with no section (int8 must refuse it, naming why).
    let _ = Classifier::new(LENET, &weights[..weights.len() - 1], Precision::Int8);
    let _ = Classifier::new(LENET, &weights[..params], Precision::Int8);
});
