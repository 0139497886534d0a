//! The shipped model on real Fashion-MNIST: int8 hash codes equal the float model's on >= 99% of bits, the int8
//! hash layer is within quantisation tolerance of the float one, and the compiled weight pages hold the int8 kernels.

use nearflash_cognitive::fmnist::{self, Part};
use nearflash_cognitive::instr::{compile, Instr};
use nearflash_cognitive::model::{pack_code, Model};
use nearflash_cognitive::quant::QModel;
use nearflash_cognitive::weight_layout::{ReservedArea, WeightLayout};

#[test]
fn int8_matches_float_on_fashion_mnist() {
    let m = Model::shipped().expect("the shipped model loads");
    assert_eq!(m.network.bits().unwrap(), 48);
    let dir = fmnist::default_dir();
    if !dir.join("t10k-images-idx3-ubyte.gz").exists() {
        return; // dataset-fashion-mnist not installed
    }
    let train = fmnist::load(&dir, Part::Train).unwrap().head(300);
    let test = fmnist::load(&dir, Part::Test).unwrap().head(200);
    let cal: Vec<&[u8]> = (0..train.len()).map(|i| train.image(i)).collect();
    let q = QModel::quantise(&m, &cal).unwrap();
    let (mut diff, mut worst, mut range) = (0u32, 0f32, 0f32);
    let mut right = 0;
    for i in 0..test.len() {
        let f = m.forward(test.image(i)).unwrap();
        let (_, real) = q.forward(test.image(i)).unwrap();
        diff += (pack_code(&f) ^ q.hash(test.image(i)).unwrap()).count_ones();
        for (a, b) in f.iter().zip(&real) {
            worst = worst.max((a - b).abs());
            range = range.max(a.abs());
        }
        let logits = m.classify(test.image(i)).unwrap();
        let best = (0..10).max_by(|&a, &b| logits[a].total_cmp(&logits[b])).unwrap();
        right += usize::from(best == test.labels[i] as usize);
    }
    let agree = 1.0 - diff as f64 / (test.len() * 48) as f64;
    assert!(agree >= 0.99, "bit agreement {agree}");
    assert!(worst < 0.05 * range, "int8 error {worst} over a range of {range}");
    assert!(right as f64 / test.len() as f64 > 0.8, "accuracy {right}/200");

    let area = ReservedArea { channels: 8, ways: 8, first_block: 1000, blocks: 24, pages_per_block: 256, page_size: 16384 };
    let wl = WeightLayout::plan(&q, area).unwrap();
    let pages = wl.pages(&q);
    let fc1 = wl.layers.iter().position(|l| l.layer == "fc1").unwrap();
    let k = wl.gather(&pages, fc1, 127, 512);
    assert_eq!(k, q.layers[fc1].weight[127 * 512..128 * 512].iter().map(|&w| w as u8).collect::<Vec<_>>());
    for ins in compile(&q, &wl).unwrap() {
        assert_eq!(Instr::decode(&ins.encode()).unwrap(), ins);
    }
}
