//! A tiny HIP program for the demo and the tests. It reaches HIP only through `dlopen` and
//! `dlsym`, like Python frameworks do, so it runs against the simulated runtime and real
//! ROCm alike, and under `amvgpu run` it meets the hook through audited `dlsym` lookups.
//!
//! ```text
//! amvgpu-demo-workload fill [STEP]   allocate STEP bytes (default 256M) at a time until refused
//! amvgpu-demo-workload hold BYTES    allocate BYTES once
//! amvgpu-demo-workload usage         print what the simulator counts on device 0 (hipsimGetUsage)
//! ```
//! `fill` and `hold` then print `holding <bytes>` and keep the memory until standard input
//! closes, so a caller can look at the job while it runs without sleeping.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::io::{BufRead, Write};
use std::process::ExitCode;

type HipMalloc = unsafe extern "C" fn(*mut *mut c_void, usize) -> c_int;
type HipFree = unsafe extern "C" fn(*mut c_void) -> c_int;
type HipMemGetInfo = unsafe extern "C" fn(*mut usize, *mut usize) -> c_int;
type HipsimGetUsage = unsafe extern "C" fn(c_int, *mut usize, *mut usize) -> c_int;

const HIP_ERROR_OUT_OF_MEMORY: c_int = 2;
/// Bounds `fill` when nothing limits it (e.g. run without amvgpu).
const MAX_STEPS: usize = 4096;

struct Hip {
    handle: *mut c_void,
}

impl Hip {
    fn open() -> Result<Hip, String> {
        let mut tried = Vec::new();
        for name in ["libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"] {
            let c_name = CString::new(name).expect("library names have no NUL");
            // SAFETY: c_name is NUL-terminated and outlives the call; dlopen copies it.
            let handle = unsafe { libc::dlopen(c_name.as_ptr(), libc::RTLD_NOW) };
            if !handle.is_null() {
                return Ok(Hip { handle });
            }
            tried.push(format!("{name}: {}", last_dl_error()));
        }
        Err(format!(
            "cannot load the HIP runtime ({}); set LD_LIBRARY_PATH to the directory of libamdhip64.so",
            tried.join("; ")
        ))
    }

    /// Looks up `name`; the caller names the function type it has in HIP's headers.
    fn symbol(&self, name: &str) -> Option<*mut c_void> {
        let c_name = CString::new(name).ok()?;
        // SAFETY: handle came from a successful dlopen and is never closed; c_name is
        // NUL-terminated and outlives the call.
        let address = unsafe { libc::dlsym(self.handle, c_name.as_ptr()) };
        (!address.is_null()).then_some(address)
    }

    fn require(&self, name: &str) -> Result<*mut c_void, String> {
        self.symbol(name)
            .ok_or_else(|| format!("the HIP runtime has no {name}"))
    }
}

fn last_dl_error() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string valid until the next dl call
    // on this thread; it is copied before any other dl call.
    let message: *const c_char = unsafe { libc::dlerror() };
    if message.is_null() {
        "unknown error".into()
    } else {
        // SAFETY: non-NULL dlerror results are NUL-terminated (see above).
        unsafe { CStr::from_ptr(message) }
            .to_string_lossy()
            .into_owned()
    }
}

fn error_name(code: c_int) -> String {
    match code {
        0 => "hipSuccess".into(),
        1 => "hipErrorInvalidValue".into(),
        HIP_ERROR_OUT_OF_MEMORY => "hipErrorOutOfMemory".into(),
        3 => "hipErrorNotInitialized".into(),
        100 => "hipErrorNoDevice".into(),
        101 => "hipErrorInvalidDevice".into(),
        other => format!("HIP error {other}"),
    }
}

fn mib(bytes: usize) -> String {
    format!("{} MiB", bytes >> 20)
}

fn parse_bytes(text: &str) -> Result<usize, String> {
    let (digits, shift) = match text.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        None => (text, 0),
        Some((i, _)) => match text[i..].to_ascii_lowercase().as_str() {
            "k" => (&text[..i], 10),
            "m" => (&text[..i], 20),
            "g" => (&text[..i], 30),
            _ => {
                return Err(format!(
                    "\"{text}\": expected bytes such as 256M, 1G or 4096"
                ))
            }
        },
    };
    digits
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("\"{text}\": expected a positive size such as 256M"))
}

fn main() -> ExitCode {
    match real_main() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("amvgpu-demo-workload: {message}");
            ExitCode::FAILURE
        }
    }
}

fn real_main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: amvgpu-demo-workload fill [STEP] | hold BYTES | usage";
    let hip = Hip::open()?;
    match args.first().map(String::as_str) {
        Some("usage") => {
            let address = hip
                .symbol("hipsimGetUsage")
                .ok_or("the HIP runtime is not the simulator (no hipsimGetUsage)")?;
            // SAFETY: hipsimGetUsage has this signature in the simulator's header.
            let get_usage: HipsimGetUsage = unsafe { std::mem::transmute(address) };
            let (mut live, mut peak) = (0usize, 0usize);
            // SAFETY: both out-pointers are valid for writes for the call's duration.
            let rc = unsafe { get_usage(0, &mut live, &mut peak) };
            if rc != 0 {
                return Err(format!("hipsimGetUsage(0) failed: {}", error_name(rc)));
            }
            println!("live {live} peak {peak}");
            Ok(())
        }
        Some("fill") => {
            let step = args.get(1).map_or(Ok(256 << 20), |s| parse_bytes(s))?;
            work(&hip, step, MAX_STEPS)
        }
        Some("hold") => {
            let bytes = parse_bytes(args.get(1).ok_or(usage)?)?;
            work(&hip, bytes, 1)
        }
        _ => Err(usage.into()),
    }
}

fn work(hip: &Hip, step: usize, max_steps: usize) -> Result<(), String> {
    // SAFETY: the symbol is HIP's hipMalloc, whose C signature HipMalloc copies
    // (hip_runtime_api.h; hipError_t is a C enum, passed as int).
    let malloc: HipMalloc = unsafe { std::mem::transmute(hip.require("hipMalloc")?) };
    // SAFETY: as above.
    let free: HipFree = unsafe { std::mem::transmute(hip.require("hipFree")?) };
    // SAFETY: as above.
    let mem_get_info: HipMemGetInfo = unsafe { std::mem::transmute(hip.require("hipMemGetInfo")?) };

    let mask = std::env::var("HSA_CU_MASK").unwrap_or_else(|_| "(none)".into());
    println!("HSA_CU_MASK={mask}");
    let (mut free_bytes, mut total_bytes) = (0usize, 0usize);
    // SAFETY: both out-pointers are valid for writes for the call's duration.
    let rc = unsafe { mem_get_info(&mut free_bytes, &mut total_bytes) };
    if rc != 0 {
        return Err(format!("hipMemGetInfo failed: {}", error_name(rc)));
    }
    println!(
        "hipMemGetInfo: total {}, free {}",
        mib(total_bytes),
        mib(free_bytes)
    );

    let mut held: Vec<*mut c_void> = Vec::new();
    let mut refusal = None;
    while held.len() < max_steps {
        let mut pointer: *mut c_void = std::ptr::null_mut();
        // SAFETY: pointer is valid for a write; the size is what we ask for.
        let rc = unsafe { malloc(&mut pointer, step) };
        if rc != 0 {
            refusal = Some(rc);
            break;
        }
        held.push(pointer);
    }
    let holding = held.len() * step;
    match refusal {
        Some(rc) => println!(
            "hipMalloc({}) x {} succeeded; the next one returned {} ({rc})",
            mib(step),
            held.len(),
            error_name(rc)
        ),
        None => println!("hipMalloc({}) x {} succeeded", mib(step), held.len()),
    }
    if max_steps == 1 && refusal.is_some() {
        return Err("the allocation was refused".into());
    }
    println!("holding {holding}");
    let _ = std::io::stdout().flush();
    // Keep the memory until whoever started us closes our standard input.
    let mut line = String::new();
    while std::io::stdin()
        .lock()
        .read_line(&mut line)
        .is_ok_and(|n| n > 0)
    {
        line.clear();
    }
    for pointer in held {
        // SAFETY: each pointer came from a successful hipMalloc and is freed once.
        unsafe { free(pointer) };
    }
    Ok(())
}
