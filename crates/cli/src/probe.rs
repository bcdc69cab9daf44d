//! `ringkit probe`: what io_uring can do on this kernel, and which backend
//! `auto` would pick (and why).

use ringkit::Backend;
use ringkit_uring::KernelReport;

pub fn probe(json: bool) -> std::io::Result<()> {
    let k = KernelReport::gather();
    let auto = ringkit::Builder::new()
        .backend(Backend::Auto)
        .build()
        .map(|rt| rt.backend_report().clone());
    if json {
        let v = serde_json::json!({
            "kernel": k.kernel,
            "io_uring_usable": k.usable.is_ok(),
            "why_not": k.usable.as_ref().err(),
            "features": k.feature_names(),
            "setup_flags": k.setup_flag_names(),
            "opcodes_supported": k.probe.as_ref().map(|p| p.supported_names()),
            "opcodes_missing": k.probe.as_ref().map(|p| p.unsupported_names()),
            "auto_backend": auto.as_ref().map(|r| r.to_string()).map_err(|e| e.to_string()),
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    println!("kernel:           {}", k.kernel);
    match &k.usable {
        Ok(()) => println!("io_uring:         usable"),
        Err(why) => println!("io_uring:         NOT usable: {why}"),
    }
    if k.usable.is_ok() {
        println!("features:         {}", k.feature_names());
        println!("setup flags:      {}", k.setup_flag_names());
        if let Some(p) = &k.probe {
            println!(
                "opcodes ({}):     {}",
                p.supported_names().len(),
                p.supported_names().join(" ")
            );
            let missing = p.unsupported_names();
            if !missing.is_empty() {
                println!("missing opcodes:  {}", missing.join(" "));
            }
        }
    }
    match auto {
        Ok(r) => {
            println!("Backend::Auto:    {r}");
            for a in &r.attempts {
                println!("  tried first:    {a}");
            }
        }
        Err(e) => println!("Backend::Auto:    cannot build a runtime: {e}"),
    }
    Ok(())
}
