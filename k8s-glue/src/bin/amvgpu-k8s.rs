//! `amvgpu-k8s`: ask HAMi's AMD protocol questions from the command line.
//! Reads one JSON document on stdin, prints one JSON document on stdout.

use std::io::{self, Read, Write};
use std::process::ExitCode;

use k8s_glue::allocate::{allocate, AllocateInput, PluginOptions};
use k8s_glue::cu_alloc::{decode_cu_allocated, CU_ALLOCATED};
use k8s_glue::devices::{
    decode_plugin_groups, decode_scheduler_groups, DEVICES_ALLOCATED, DEVICES_TO_ALLOCATE,
};
use k8s_glue::fit::{fit_pod, Policy};
use k8s_glue::lock::{decode_lock, NODE_LOCK};
use k8s_glue::node::{decode_node, GpuInfo, NODE_REGISTER};
use k8s_glue::pod::{pods_from_json, Node, Pod};
use k8s_glue::{topology, Error};
use serde::Deserialize;
use serde_json::{json, Map, Value};

const HELP: &str = "\
amvgpu-k8s: HAMi's AMD GPU protocol, offline. Reads JSON on stdin, prints JSON on stdout.

USAGE:
    amvgpu-k8s <COMMAND> < input.json

COMMANDS:
    decode-node   Decode and check a node's hami.io/node-amd-register and hami.io/mutex.lock.
                  Input: a Node object (kubectl get node NAME -o json).
    decode-pod    Decode and check a pod's AMD requests and annotations.
                  Input: a Pod object (kubectl get pod NAME -o json).
    fit           Would the pod fit on the node, and on which GPUs?
                  Input: {\"node\": Node, \"pods\": [Pod] or PodList, \"pod\": Pod,
                          \"policy\": \"binpack\" | \"spread\"}   (policy optional, default binpack)
    allocate      What would the device plugin answer for one container of the pod?
                  Input: {\"node\": Node, \"pods\": [Pod] or PodList, \"pod\": Pod,
                          \"container\": NAME,          (optional: default the next unserved group)
                          \"require_lock\": BOOL,       (optional: refuse unless the pod owns the node lock)
                          \"options\": {\"hook_path\", \"hook_host_path\", \"device_memory_scaling\",
                                      \"rocr_ids\": {AMD-SMI-UUID: \"GPU-<16 hex>\"}}}   (optional)
    help          Print this text (also -h, --help).

The pod being asked about needs hami.io/amd-devices-to-allocate for `allocate` (run `fit` and
copy its annotation to simulate the scheduler). Errors are printed as
{\"error\": {\"input\", \"text\", \"problem\", \"message\"}} with exit status 1; a usage error exits 2.
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let command = match args.as_slice() {
        [c] => c.as_str(),
        _ => return usage_error("expected exactly one command; see --help"),
    };
    if matches!(command, "help" | "-h" | "--help") {
        print!("{HELP}");
        return ExitCode::SUCCESS;
    }
    if !matches!(command, "decode-node" | "decode-pod" | "fit" | "allocate") {
        return usage_error(&format!("unknown command {command:?}; see --help"));
    }
    let mut input = String::new();
    if let Err(e) = io::stdin().read_to_string(&mut input) {
        return fail(Error::new("stdin", "", format!("cannot be read: {e}")));
    }
    let result = serde_json::from_str::<Value>(&input)
        .map_err(|e| Error::new("stdin", excerpt(&input), format!("is not JSON: {e}")))
        .and_then(|value| match command {
            "decode-node" => decode_node_cmd(value),
            "decode-pod" => decode_pod_cmd(value),
            "fit" => fit_cmd(value),
            _ => allocate_cmd(value),
        });
    match result {
        Ok(out) => {
            print_json(&out);
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

fn excerpt(text: &str) -> String {
    text.chars().take(200).collect()
}

fn print_json(value: &Value) {
    let mut out = io::stdout().lock();
    // A closed stdout (`| head`) is not worth a panic.
    let _ = writeln!(
        out,
        "{}",
        serde_json::to_string_pretty(value).unwrap_or_default()
    );
}

fn fail(e: Error) -> ExitCode {
    print_json(
        &json!({"error": {"input": e.input, "text": e.text, "problem": e.problem, "message": e.to_string()}}),
    );
    ExitCode::from(1)
}

fn usage_error(message: &str) -> ExitCode {
    print_json(
        &json!({"error": {"input": "command line", "text": std::env::args().skip(1).collect::<Vec<_>>().join(" "), "problem": message, "message": message}}),
    );
    ExitCode::from(2)
}

fn parse<T: for<'de> Deserialize<'de>>(what: &str, value: Value) -> Result<T, Error> {
    let text = excerpt(&value.to_string());
    serde_json::from_value(value)
        .map_err(|e| Error::new(what, text, format!("does not have the expected shape: {e}")))
}

fn field(input: &mut Map<String, Value>, key: &str) -> Result<Value, Error> {
    input
        .remove(key)
        .ok_or_else(|| Error::new(format!("stdin.{key}"), "", "is missing"))
}

fn object(value: Value) -> Result<Map<String, Value>, Error> {
    match value {
        Value::Object(m) => Ok(m),
        other => Err(Error::new(
            "stdin",
            excerpt(&other.to_string()),
            "must be a JSON object",
        )),
    }
}

fn node_gpus(node: &Node) -> Result<Vec<GpuInfo>, Error> {
    let text = node
        .metadata
        .annotations
        .get(NODE_REGISTER)
        .ok_or_else(|| {
            Error::new(
                format!("node {:?} annotations", node.metadata.name),
                "",
                format!("have no {NODE_REGISTER}"),
            )
        })?;
    decode_node(text)
}

fn gpu_view(gpu: &GpuInfo) -> Value {
    let layout = match topology::of(gpu) {
        Ok(t) => json!({"cus": t.cu_count(), "xcds": t.xcd_count(), "cu_per_wgp": t.cu_per_wgp()}),
        Err(e) => json!({"error": e.to_string()}),
    };
    json!({
        "registration": gpu,
        "cu_layout": layout,
        "rocr_id": gpu.rocr_uuid().ok().flatten(),
        "xgmi_peers": gpu.xgmi_peers().unwrap_or_default(),
    })
}

fn decode_node_cmd(value: Value) -> Result<Value, Error> {
    let node: Node = parse("stdin (a Node object)", value)?;
    let gpus = node_gpus(&node)?;
    let lock = match node.metadata.annotations.get(NODE_LOCK) {
        Some(text) => {
            let l = decode_lock(text)?;
            json!({"time": l.time, "unix_seconds": l.unix_seconds, "namespace": l.namespace, "pod": l.pod})
        }
        None => Value::Null,
    };
    Ok(json!({"gpus": gpus.iter().map(gpu_view).collect::<Vec<_>>(), "lock": lock}))
}

fn decode_pod_cmd(value: Value) -> Result<Value, Error> {
    let pod: Pod = parse("stdin (a Pod object)", value)?;
    let containers: Vec<Value> =
        pod.amd_containers()?.into_iter().map(|(name, request)| json!({"name": name, "request": request, "whole_gpu": request.is_whole_gpu()})).collect();
    let mut out = Map::new();
    out.insert("pod".into(), json!(pod.key()));
    out.insert("amd_containers".into(), json!(containers));
    for key in [DEVICES_TO_ALLOCATE, DEVICES_ALLOCATED] {
        if let Some(text) = pod.annotation(key) {
            out.insert(
                key.into(),
                json!({"scheduler_groups": decode_scheduler_groups(key, text)?, "plugin_groups": decode_plugin_groups(key, text)?}),
            );
        }
    }
    if let Some(text) = pod.annotation(CU_ALLOCATED) {
        let claims = decode_cu_allocated(text)?;
        let view: Map<String, Value> = claims
            .iter()
            .map(|(u, s)| (u.clone(), json!({"cus": s.to_string(), "count": s.len()})))
            .collect();
        out.insert(CU_ALLOCATED.into(), Value::Object(view));
    }
    Ok(Value::Object(out))
}

fn common_inputs(input: &mut Map<String, Value>) -> Result<(Vec<GpuInfo>, Vec<Pod>, Pod), Error> {
    let node: Node = parse("stdin.node", field(input, "node")?)?;
    let gpus = node_gpus(&node)?;
    let pods = pods_from_json(input.remove("pods").unwrap_or(Value::Null)).map_err(|e| {
        Error::new(
            "stdin.pods",
            "",
            format!("must be a list of Pod objects: {e}"),
        )
    })?;
    let pod: Pod = parse("stdin.pod", field(input, "pod")?)?;
    Ok((gpus, pods, pod))
}

fn fit_cmd(value: Value) -> Result<Value, Error> {
    let mut input = object(value)?;
    let (gpus, pods, pod) = common_inputs(&mut input)?;
    let policy = match input.remove("policy") {
        None | Some(Value::Null) => Policy::Binpack,
        Some(Value::String(s)) => Policy::parse("stdin.policy", &s)?,
        Some(other) => {
            return Err(Error::new(
                "stdin.policy",
                other.to_string(),
                "must be \"binpack\" or \"spread\"",
            ))
        }
    };
    let answer = fit_pod(&gpus, &pods, &pod, policy)?;
    Ok(serde_json::to_value(answer).unwrap_or_default())
}

fn allocate_cmd(value: Value) -> Result<Value, Error> {
    let mut input = object(value)?;
    let node: Node = parse(
        "stdin.node",
        input.get("node").cloned().unwrap_or(Value::Null),
    )?;
    let (gpus, pods, pod) = common_inputs(&mut input)?;
    let container = match input.remove("container") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(other) => {
            return Err(Error::new(
                "stdin.container",
                other.to_string(),
                "must be a container name",
            ))
        }
    };
    let require_lock = match input.remove("require_lock") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => b,
        Some(other) => {
            return Err(Error::new(
                "stdin.require_lock",
                other.to_string(),
                "must be true or false",
            ))
        }
    };
    let options: PluginOptions = match input.remove("options") {
        None | Some(Value::Null) => PluginOptions::default(),
        Some(v) => parse("stdin.options", v)?,
    };
    let node_lock = if require_lock {
        Some(
            node.metadata
                .annotations
                .get(NODE_LOCK)
                .map(String::as_str)
                .ok_or_else(|| {
                    Error::new(
                        format!("node {:?} annotations", node.metadata.name),
                        "",
                        format!("have no {NODE_LOCK}, and require_lock is set"),
                    )
                })?,
        )
    } else {
        None
    };
    let answer = allocate(AllocateInput {
        gpus: &gpus,
        pods: &pods,
        pod: &pod,
        container: container.as_deref(),
        node_lock,
        options: &options,
    })?;
    Ok(serde_json::to_value(answer).unwrap_or_default())
}
