//! Runs the `amvgpu-k8s` binary the way an operator does; the worked example of README.md uses
//! the same testdata, so the README output is checked here.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn testdata(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(name)
}

fn run(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_amvgpu-k8s"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A usage error exits before reading stdin; the broken pipe is then expected.
    let _ = child.stdin.take().unwrap().write_all(stdin);
    child.wait_with_output().unwrap()
}

fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

#[test]
fn readme_allocate_example_prints_the_documented_answer() {
    let out = run(
        &["allocate"],
        &std::fs::read(testdata("allocate-input.json")).unwrap(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(
        String::from_utf8(out.stdout.clone()).unwrap(),
        std::fs::read_to_string(testdata("allocate-output.json")).unwrap()
    );
    let answer = json_of(&out);
    assert_eq!(answer["envs"]["HSA_CU_MASK"], "0:72-143;1:0-71");
    assert_eq!(
        answer["envs"]["ROCR_VISIBLE_DEVICES"],
        "GPU-a1b2c3d4e5f60718,GPU-0f1e2d3c4b5a6978"
    );
}

#[test]
fn readme_fit_example_prints_the_documented_answer() {
    let out = run(
        &["fit"],
        &std::fs::read(testdata("fit-input.json")).unwrap(),
    );
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        std::fs::read_to_string(testdata("fit-output.json")).unwrap()
    );
}

#[test]
fn decode_node_reports_each_gpus_layout() {
    let out = run(
        &["decode-node"],
        &std::fs::read(testdata("node.json")).unwrap(),
    );
    assert!(out.status.success());
    let v = json_of(&out);
    assert_eq!(v["gpus"].as_array().unwrap().len(), 2);
    assert_eq!(v["gpus"][0]["cu_layout"]["xcds"], 8);
    assert_eq!(v["gpus"][1]["rocr_id"], "GPU-0f1e2d3c4b5a6978");
    assert_eq!(v["lock"], Value::Null);
}

#[test]
fn decode_pod_shows_both_decoders() {
    let pod = br#"{"metadata": {"name": "p", "namespace": "ns", "annotations": {
        "hami.io/amd-devices-to-allocate": ";U1,T,1,8:;",
        "hami.io/amd-cu-allocated": "{\"U1\":\"0-7\"}"}},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"amd.com/gpu": "1", "amd.com/gpucores": "5"}}}]}}"#;
    let out = run(&["decode-pod"], pod);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let v = json_of(&out);
    let ann = &v["hami.io/amd-devices-to-allocate"];
    assert_eq!(ann["scheduler_groups"].as_array().unwrap().len(), 3);
    assert_eq!(ann["plugin_groups"].as_array().unwrap().len(), 1);
    assert_eq!(v["hami.io/amd-cu-allocated"]["U1"]["count"], 8);
    assert_eq!(v["amd_containers"][0]["request"]["cores_percent"], 5);
}

#[test]
fn errors_are_json_with_a_non_zero_exit() {
    let bad_annotation = br#"{"metadata": {"name": "p", "annotations": {"hami.io/amd-cu-allocated": "{\"U1\":\"0-3,3\"}"}}}"#;
    let out = run(&["decode-pod"], bad_annotation);
    assert_eq!(out.status.code(), Some(1));
    let err = &json_of(&out)["error"];
    assert_eq!(err["input"], "hami.io/amd-cu-allocated[\"U1\"]");
    assert_eq!(err["text"], "0-3,3");

    let out = run(&["fit"], b"not json");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json_of(&out)["error"]["input"], "stdin");

    let out = run(&["frobnicate"], b"{}");
    assert_eq!(out.status.code(), Some(2));
    assert!(json_of(&out)["error"]["problem"]
        .as_str()
        .unwrap()
        .contains("frobnicate"));
}

#[test]
fn help_describes_every_command() {
    let out = run(&["--help"], b"");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for command in ["decode-node", "decode-pod", "fit", "allocate"] {
        assert!(text.contains(command), "--help lacks {command}");
    }
}

/// The README's worked example shows exactly the outputs checked above.
#[test]
fn readme_shows_the_checked_outputs() {
    let readme =
        std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("README.md"))
            .unwrap();
    for (command, output) in [
        ("$ amvgpu-k8s fit < fit-input.json\n", "fit-output.json"),
        (
            "$ amvgpu-k8s allocate < allocate-input.json\n",
            "allocate-output.json",
        ),
    ] {
        let start = readme
            .find(command)
            .unwrap_or_else(|| panic!("README lacks {command:?}"))
            + command.len();
        let end = start + readme[start..].find("```").unwrap();
        assert_eq!(
            &readme[start..end],
            std::fs::read_to_string(testdata(output)).unwrap(),
            "README output of {command:?}"
        );
    }
}
