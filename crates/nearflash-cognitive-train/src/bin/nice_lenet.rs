//! `nearflash-nice-train`: trains NICE-C's LeNet-5 (the layer list of `nearflash_nice::lenet::layers`) on
//! Fashion-MNIST with candle on the CPU and writes the weights file NICE's in-storage LeNet reads (f32
//! little-endian, layer by layer, weights then biases: `nearflash_nice::lenet`), plus `OUT.json` with the training
//! record. Reproducible: He-uniform start values and the batch order both come from `--seed`. The file is checked
//! by loading it with the crate's own parser and classifying the test images with its f32 forward pass (the
//! in-storage kernels): that accuracy is reported beside candle's.

use candle_core::{Device, Tensor, Var};
use nearflash_cognitive::fmnist::Split;
use nearflash_cognitive_train::{accuracy, fit, load_splits, main_with, parse_args, Common};
use nearflash_nice::cnn::{layer_cost, Act, Layer, Shape};
use nearflash_nice::lenet::{self, LeNet};
use rand::{Rng, SeedableRng};

const NAME: &str = "nearflash-nice-train";
const USAGE: &str = "--out PATH [--epochs 6] [--batch 64] [--lr 0.001] [--seed 1] [--limit N] [--data DIR]";

/// Each weighted layer's (weights, biases) as trainable variables, He-uniform (bound sqrt(6 / fan_in)), biases 0.
fn init(input: Shape, layers: &[Layer], seed: u64, dev: &Device) -> Result<Vec<Var>, Box<dyn std::error::Error>> {
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    let (mut s, mut vars) = (input, Vec::new());
    for l in layers {
        let wshape: Option<Vec<usize>> = match *l {
            Layer::Conv { out, k, groups, .. } => Some(vec![out, s.0 / groups, k, k]),
            Layer::Linear { out } => Some(vec![out, s.0 * s.1 * s.2]),
            Layer::MaxPool { .. } | Layer::Act(_) => None,
            ref other => return Err(format!("{other:?}: the trainer runs conv, pool, linear and activations only").into()),
        };
        if let Some(w) = wshape {
            let fan_in: usize = w[1..].iter().product();
            let bound = (6.0 / fan_in as f64).sqrt() as f32;
            let n: usize = w.iter().product();
            let vals: Vec<f32> = (0..n).map(|_| rng.gen_range(-bound..bound)).collect();
            vars.push(Var::from_tensor(&Tensor::from_vec(vals, w.as_slice(), dev)?)?);
            vars.push(Var::zeros(w[0], candle_core::DType::F32, dev)?);
        }
        s = layer_cost(l, s)?.0;
    }
    Ok(vars)
}

/// The logits of an (n, 1, 28, 28) batch, layer by layer as NICE-C runs them (CHW flattening before a linear).
fn forward(layers: &[Layer], vars: &[Var], x: &Tensor) -> candle_core::Result<Tensor> {
    let (mut x, mut p) = (x.clone(), vars.iter());
    let mut next = || p.next().map(Var::as_tensor).ok_or_else(|| candle_core::Error::Msg("missing parameters".into()));
    for l in layers {
        x = match *l {
            Layer::Conv { out, stride, pad, groups, .. } => {
                let (w, b) = (next()?, next()?);
                x.conv2d(w, pad, stride, 1, groups)?.broadcast_add(&b.reshape((1, out, 1, 1))?)?
            }
            Layer::MaxPool { k, stride } => x.max_pool2d_with_stride((k, k), (stride, stride))?,
            Layer::Linear { .. } => {
                let (w, b) = (next()?, next()?);
                let flat = if x.rank() > 2 { x.flatten_from(1)? } else { x };
                flat.matmul(&w.t()?)?.broadcast_add(b)?
            }
            Layer::Act(Act::Relu) => x.relu()?,
            Layer::Act(Act::Relu6) => x.clamp(0f32, 6f32)?,
            ref other => return Err(candle_core::Error::Msg(format!("{other:?} is not trainable here"))),
        };
    }
    Ok(x)
}

/// Accuracy of the weights file through `nearflash_nice::lenet::LeNet` (the firmware's f32 kernels).
fn crate_accuracy(bytes: &[u8], test: &Split) -> Result<f64, Box<dyn std::error::Error>> {
    let net = LeNet::from_bytes(bytes)?;
    let mut right = 0usize;
    for i in 0..test.len() {
        right += usize::from(net.classify(test.image(i))? == test.labels[i]);
    }
    Ok(right as f64 / test.len().max(1) as f64)
}

fn run(a: Common) -> Result<(), Box<dyn std::error::Error>> {
    let dev = Device::Cpu;
    let (train, test) = load_splits(&a)?;
    let (shape, layers) = lenet::layers();
    let vars = init(shape, &layers, a.seed, &dev)?;
    let logits = |x: &Tensor| forward(&layers, &vars, x);
    let train_s = fit(vars.clone(), &train, &a, &dev, logits)?;
    let acc = accuracy(&test, &dev, logits)?;
    let mut bytes = Vec::with_capacity(lenet::WEIGHT_BYTES);
    for v in &vars {
        for x in v.as_tensor().flatten_all()?.to_vec1::<f32>()? {
            bytes.extend_from_slice(&x.to_le_bytes());
        }
    }
    let crate_acc = crate_accuracy(&bytes, &test)?;
    std::fs::write(&a.out, &bytes)?;
    let record = format!(
        "{{\"trainer\": \"{NAME} (candle-core 0.9, CPU)\", \"network\": \"lenet5\", \"seed\": {}, \"epochs\": {}, \
         \"batch\": {}, \"lr\": {}, \"optimizer\": \"AdamW, weight decay 0\", \"init\": \"He uniform, biases 0\", \
         \"train_images\": {}, \"test_images\": {}, \"train_seconds\": {train_s:.1}, \"test_accuracy\": {acc:.4}, \
         \"test_accuracy_nice_kernels\": {crate_acc:.4}, \"bytes\": {}}}",
        a.seed,
        a.epochs,
        a.batch,
        a.lr,
        train.len(),
        test.len(),
        bytes.len()
    );
    std::fs::write(format!("{}.json", a.out), format!("{record}\n"))?;
    println!("{record}");
    Ok(())
}

fn main() {
    main_with(NAME, USAGE, || parse_args(std::env::args().skip(1), 6, |_, _| Ok(false)), run);
}
