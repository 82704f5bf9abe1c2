//! A minimal check on the plugin core that can be told to misbehave (test-only).

use clap::Parser;
use plugin::{Check, CommonArgs, Ctx, Perfdata, Report, Status, Unknown};

#[derive(Parser)]
#[command(name = "plugin_selftest", version)]
struct Opts {
    #[command(flatten)]
    common: CommonArgs,
    /// panic | hang | sigbus | ok
    #[arg(long, default_value = "ok")]
    mode: String,
    /// A FIFO to open for `hang` (blocks until a writer appears).
    #[arg(long)]
    fifo: Option<std::path::PathBuf>,
}

impl Check for Opts {
    const NAME: &'static str = "SELFTEST";
    const BINARY: &'static str = "plugin_selftest";
    fn common(&self) -> &CommonArgs {
        &self.common
    }
    fn run(&self, ctx: &Ctx) -> Result<Report, Unknown> {
        match self.mode.as_str() {
            "panic" => {
                let v: Vec<u8> = Vec::new();
                let i = std::env::args().count() + 10;
                Ok(Report::new(Status::Ok, format!("{}", v[i])))
            }
            "hang" => {
                ctx.stage("opening the fifo");
                let p = self.fifo.clone().ok_or("--fifo needed")?;
                let _ = std::fs::File::open(p);
                Ok(Report::new(Status::Ok, "a writer appeared"))
            }
            "sigbus" => {
                // What a --pods-json file truncated by another process while it is mapped does.
                ctx.stage("reading a mapped file");
                let p =
                    std::env::temp_dir().join(format!("selftest-sigbus-{}", std::process::id()));
                std::fs::write(&p, vec![b'x'; 8192]).map_err(|e| e.to_string())?;
                let f = std::fs::File::open(&p).map_err(|e| e.to_string())?;
                let m = plugin::mapped::map(&f, 8192).map_err(|e| e.to_string())?;
                std::fs::File::options()
                    .write(true)
                    .open(&p)
                    .and_then(|w| w.set_len(0))
                    .map_err(|e| e.to_string())?;
                let _ = std::fs::remove_file(&p);
                let last = std::hint::black_box(&m[..])[8191];
                Ok(Report::new(Status::Ok, format!("no SIGBUS (read {last})")))
            }
            _ => Ok(Report::new(Status::Ok, "fine").perf(Perfdata::new("n", 1.0))),
        }
    }
}

fn main() {
    plugin::main::<Opts>()
}
