//! `rtlab buffer-experiment` (hidden): the experiment behind BENCHMARKS.md's "is the forecast
//! right?" (`rtlab_session::buffer`): flags in, the record and the underrun counts printed.

use crate::output::RecordOutputs;
use rtlab_core::Nanos;
use rtlab_probe::buffer_experiment::ExperimentConfig;
use rtlab_sys::sched::Policy;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Buffer period t (one wake-up and one buffer per period)
    #[arg(long, default_value = "2ms", value_parser = crate::flags::duration)]
    pub period: Nanos,
    /// CPU work per buffer c
    #[arg(long, default_value = "200us", value_parser = crate::flags::duration)]
    pub compute: Nanos,
    /// Buffer counts n to count underruns for
    #[arg(long, value_delimiter = ',', default_value = "2,3,4")]
    pub buffers: Vec<u32>,
    /// How long to run
    #[arg(short = 'D', long, default_value = "60s", value_parser = crate::flags::duration)]
    pub duration: Nanos,
    /// The producer's class: `normal` (SCHED_OTHER) or `fifo:PRIO`
    #[arg(long, default_value = "normal", value_parser = crate::flags::producer_policy)]
    pub producer: Policy,
    /// CPU to pin the producer to
    #[arg(long)]
    pub producer_cpu: Option<usize>,
    /// CPU to pin the device to
    #[arg(long)]
    pub device_cpu: Option<usize>,
    #[command(flatten)]
    pub record: crate::output::RecordArgs,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let outputs = RecordOutputs::open(&args.record)?;
    let stop = super::stop_flag()?;
    let config = ExperimentConfig {
        buffer_period: args.period,
        compute: args.compute,
        buffer_counts: args.buffers.clone(),
        duration: args.duration,
        producer_policy: args.producer,
        producer_cpu: args.producer_cpu,
        device_priority: 99,
        device_cpu: args.device_cpu,
    };
    let (record, result) = rtlab_session::buffer::run(&config, &stop, std::env::args().collect())?;
    if !outputs.json_to_stdout() {
        let text = rtlab_render::buffer::outcome(&result, args.period, args.compute);
        crate::output::print(&text)?;
    }
    outputs.finish(&record, "buffer experiment", false)?;
    Ok(crate::exit::finished(result.interrupted))
}
