//! `capwasm provider new`, as a provider author starts: for every world a
//! language's SDK binds, a project written into a directory outside the
//! repository builds with its own build command against the SDK as it is
//! packaged (a crate, a wheel, an npm tarball made here, found by version
//! through `--sdk`, never by a path into the repository) and passes
//! `capwasm provider conformance` as written. And `provider new` refuses,
//! changing nothing, a directory that holds anything, a bad name and a
//! world the language's SDK does not bind.
//!
//! The builds fetch from crates.io, PyPI and npm (componentize-py,
//! componentize-js, the SDKs' dependencies); Rust builds share
//! ~/.cache/capwasm/scaffold-target between runs.

mod support;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{assert_exit, capwasm, stderr, stdout};

const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// A build of a project or an SDK package: minutes the first time (a
/// toolchain from its registry), and while other work holds the cores.
const BUILD: Duration = Duration::from_secs(900);

/// `program args...` in `dir` with `env`, to completion within [`BUILD`].
async fn run(
    dir: &Path,
    program: impl AsRef<std::ffi::OsStr>,
    args: &[&str],
    env: &[(&str, &Path)],
) -> Output {
    let program = program.as_ref();
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    for (key, value) in env {
        command.env(key, value);
    }
    let child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{} starts: {e}", program.display()));
    let output = tokio::time::timeout(BUILD, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{} {args:?} finishes within {BUILD:?}", program.display()))
        .unwrap_or_else(|e| panic!("{}'s output is read: {e}", program.display()));
    assert!(
        output.status.success(),
        "{} {args:?} in {}: {}\nstdout:\n{}\nstderr:\n{}",
        program.display(),
        dir.display(),
        output.status,
        stdout(&output),
        stderr(&output)
    );
    output
}

/// The last line `program` printed on stdout: what a packaging script made.
fn last_line(output: &Output) -> PathBuf {
    PathBuf::from(stdout(output).lines().last().unwrap_or_default().trim())
}

/// A directory outside the repository for the projects.
fn outside() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let repo = std::fs::canonicalize(REPO).expect("the repository");
    assert!(
        !std::fs::canonicalize(dir.path())
            .expect("the temporary directory")
            .starts_with(&repo),
        "the projects must be written outside the repository"
    );
    dir
}

/// `capwasm provider new NAME --world WORLD --language LANGUAGE --sdk SDK` in `dir`.
async fn new(dir: &Path, name: &str, world: &str, language: &str, sdk: &Path) -> PathBuf {
    let project = dir.join(name);
    let output = capwasm([
        "provider".as_ref(),
        "new".as_ref(),
        name.as_ref(),
        "--world".as_ref(),
        world.as_ref(),
        "--language".as_ref(),
        language.as_ref(),
        "--dir".as_ref(),
        project.as_os_str(),
        "--sdk".as_ref(),
        sdk.as_os_str(),
    ])
    .await;
    assert_exit(&output, 0);
    let readme = std::fs::read_to_string(project.join("README.md")).expect("a README");
    assert!(
        readme.contains("## What to change") && readme.contains("capwasm provider conformance"),
        "{readme}"
    );
    providermodule_fits_the_crd(&project.join("deploy/providermodule.yaml"), world);
    project
}

/// The project's ProviderModule names only fields the CRD has, with a
/// string, number, boolean, list or object where the CRD says so, and
/// the world asked for. (The API server's own checks of the placeholders
/// the author writes in are left to it.)
fn providermodule_fits_the_crd(path: &Path, world: &str) {
    let crd: Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(
            Path::new(REPO).join("crds/runtime.capwasm.dev_providermodules.yaml"),
        )
        .expect("the CRD"),
    )
    .expect("the CRD is YAML");
    let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    let module: Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(path).expect("the ProviderModule"))
            .expect("the ProviderModule is YAML");
    assert_eq!(
        module["apiVersion"], "runtime.capwasm.dev/v1alpha1",
        "{module}"
    );
    assert_eq!(module["kind"], "ProviderModule", "{module}");
    assert!(module["metadata"]["name"].is_string(), "{module}");
    assert_eq!(module["spec"]["world"], world, "{module}");
    // The CRD describes spec and status; the API server, the rest.
    fits(&module["spec"], &schema["properties"]["spec"], "$.spec");
}

fn fits(value: &Value, schema: &Value, at: &str) {
    let kind = match value {
        Value::Object(_) => "object",
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(_) => "integer",
        Value::Bool(_) => "boolean",
        Value::Null => "null",
    };
    if let Some(expected) = schema["type"].as_str() {
        assert_eq!(kind, expected, "{at}: the CRD wants a {expected}");
    }
    match value {
        Value::Object(fields) => {
            for (key, field) in fields {
                let at = format!("{at}.{key}");
                let property = &schema["properties"][key];
                assert!(property.is_object(), "{at}: no such field in the CRD");
                fits(field, property, &at);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                fits(item, &schema["items"], &format!("{at}[{i}]"));
            }
        }
        _ => {}
    }
}

/// `capwasm provider conformance COMPONENT --fixtures fixtures` of `project`, passed.
async fn conformance(project: &Path, component: &Path, name: &str, world: &str) {
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("precompiled");
    let fixtures = project.join("fixtures");
    let started = Instant::now();
    let output = capwasm([
        "provider".as_ref(),
        "conformance".as_ref(),
        component.as_os_str(),
        "--world".as_ref(),
        world.as_ref(),
        "--fixtures".as_ref(),
        fixtures.as_os_str(),
        "--cache-dir".as_ref(),
        cache.as_os_str(),
    ])
    .await;
    assert_exit(&output, 0);
    let out = stdout(&output);
    // The component is the project's: it reports the project's name.
    assert!(out.contains(&format!(": {name} 0.1.0 (")), "{out}");
    let passed = out.lines().filter(|l| l.starts_with("ok ")).count();
    assert!(passed > 0 && !out.contains("FAIL"), "{out}");
    eprintln!("{name}: {passed} checks passed in {:?}", started.elapsed());
}

/// The SDK crate as `cargo package` makes it, unpacked into `dir`.
async fn rust_sdk(dir: &Path, target: &Path) -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let guests = Path::new(REPO).join("guests");
    // --allow-dirty: the tree under test, committed or not; the project's
    // build compiles it, so the package's own check build is left out.
    let package = target.join("sdk-package");
    run(
        &guests,
        &cargo,
        &[
            "package",
            "--locked",
            "--allow-dirty",
            "--no-verify",
            "-p",
            "capwasm-provider-sdk",
        ],
        &[("CARGO_TARGET_DIR", &package)],
    )
    .await;
    let crate_file = package.join("package/capwasm-provider-sdk-0.2.0-dev.crate");
    run(dir, "tar", &["-xzf", &crate_file.to_string_lossy()], &[]).await;
    let unpacked = dir.join("capwasm-provider-sdk-0.2.0-dev");
    assert!(
        unpacked.join("wit/provider/worlds.wit").is_file()
            && unpacked.join("wit/platform/composition.wit").is_file(),
        "the crate carries the WIT it binds"
    );
    unpacked
}

#[tokio::test]
async fn rust_projects_of_every_world_build_with_the_packaged_sdk_and_pass_conformance() {
    let home = std::env::var_os("HOME").expect("HOME");
    let target = Path::new(&home).join(".cache/capwasm/scaffold-target");
    let dir = outside();
    let sdk = rust_sdk(dir.path(), &target).await;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    for world in ["bootstrap", "infrastructure", "platform"] {
        let name = format!("my-{world}");
        let started = Instant::now();
        let project = new(dir.path(), &name, world, "rust", &sdk).await;
        // The project's build command, as its README gives it.
        run(
            &project,
            &cargo,
            &["build", "--release"],
            &[("CARGO_TARGET_DIR", &target)],
        )
        .await;
        let component = target
            .join("wasm32-wasip2/release")
            .join(format!("{}.wasm", name.replace('-', "_")));
        eprintln!("{name}: built in {:?}", started.elapsed());
        conformance(&project, &component, &name, world).await;
    }
}

#[tokio::test]
async fn python_projects_build_with_the_packaged_sdk_and_pass_conformance() {
    let dir = outside();
    let wheels = dir.path().join("wheels");
    let made = run(
        Path::new(REPO),
        Path::new(REPO).join("guests/python/sdk/package.sh"),
        &[&wheels.to_string_lossy()],
        &[],
    )
    .await;
    assert!(last_line(&made).is_file(), "{}", stdout(&made));
    for world in ["bootstrap", "infrastructure"] {
        let name = format!("py-{world}");
        let started = Instant::now();
        let project = new(dir.path(), &name, world, "python", &wheels).await;
        run(&project, project.join("build.sh"), &[], &[]).await;
        eprintln!("{name}: built in {:?}", started.elapsed());
        let component = project.join(format!("build/{name}.wasm"));
        conformance(&project, &component, &name, world).await;
    }
}

#[tokio::test]
async fn typescript_projects_build_with_the_packaged_sdk_and_pass_conformance() {
    let dir = outside();
    let packed = run(
        Path::new(REPO),
        Path::new(REPO).join("guests/js/sdk/pack.sh"),
        &[&dir.path().join("npm").to_string_lossy()],
        &[],
    )
    .await;
    let tarball = last_line(&packed);
    assert!(tarball.is_file(), "{}", stdout(&packed));
    for world in ["bootstrap", "infrastructure"] {
        let name = format!("ts-{world}");
        let started = Instant::now();
        let project = new(dir.path(), &name, world, "typescript", &tarball).await;
        run(
            &project,
            "npm",
            &["install", "--no-audit", "--no-fund"],
            &[],
        )
        .await;
        run(&project, "npm", &["run", "build"], &[]).await;
        eprintln!("{name}: built in {:?}", started.elapsed());
        let component = project.join(format!("build/{name}.wasm"));
        conformance(&project, &component, &name, world).await;
    }
}

/// Every file under `dir` with its bytes, to compare before and after.
fn contents(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut all = Vec::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(next) = todo.pop() {
        for entry in std::fs::read_dir(&next).expect("readable") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                all.push((path.clone(), Vec::new()));
                todo.push(path);
            } else {
                let bytes = std::fs::read(&path).expect("readable");
                all.push((path, bytes));
            }
        }
    }
    all.sort();
    all
}

#[tokio::test]
async fn new_refuses_a_non_empty_directory_a_bad_name_and_an_unbound_world_changing_nothing() {
    let dir = outside();
    let taken = dir.path().join("taken");
    std::fs::create_dir_all(taken.join("src")).expect("a directory");
    std::fs::write(taken.join("src/lib.rs"), "// mine\n").expect("a file");
    let before = contents(dir.path());

    let cases: [(&[&str], &str); 4] = [
        (
            &[
                "taken-provider",
                "--world",
                "bootstrap",
                "--language",
                "rust",
                "--dir",
            ],
            "is not empty",
        ),
        (
            &[
                "Bad_Name",
                "--world",
                "bootstrap",
                "--language",
                "rust",
                "--dir",
            ],
            "cannot name a provider",
        ),
        (
            &[
                "my-platform",
                "--world",
                "platform",
                "--language",
                "python",
                "--dir",
            ],
            "does not bind the platform world",
        ),
        (
            &[
                "my-platform",
                "--world",
                "platform",
                "--language",
                "typescript",
                "--dir",
            ],
            "does not bind the platform world",
        ),
    ];
    for (args, says) in cases {
        // The first case names the taken directory; the others a new one,
        // which must not be made.
        let target = if says == "is not empty" {
            taken.clone()
        } else {
            dir.path().join("new")
        };
        let mut all: Vec<&std::ffi::OsStr> = vec!["provider".as_ref(), "new".as_ref()];
        all.extend(args.iter().map(std::ffi::OsStr::new));
        all.push(target.as_os_str());
        let output = capwasm(all).await;
        assert_exit(&output, 1);
        assert!(
            stderr(&output).contains(says),
            "{args:?}: {}",
            stderr(&output)
        );
        assert_eq!(
            contents(dir.path()),
            before,
            "{args:?} changed the directory"
        );
    }
}

#[tokio::test]
async fn every_project_carries_a_providermodule_the_crd_takes_and_depends_on_the_sdk_by_version() {
    let dir = outside();
    for (world, language) in [
        ("bootstrap", "rust"),
        ("infrastructure", "rust"),
        ("platform", "rust"),
        ("bootstrap", "python"),
        ("infrastructure", "python"),
        ("bootstrap", "typescript"),
        ("infrastructure", "typescript"),
    ] {
        let name = format!("{language}-{world}");
        let project = dir.path().join(&name);
        let output = capwasm([
            "provider",
            "new",
            &name,
            "--world",
            world,
            "--language",
            language,
            "--dir",
            &project.to_string_lossy(),
        ])
        .await;
        assert_exit(&output, 0);
        providermodule_fits_the_crd(&project.join("deploy/providermodule.yaml"), world);
        // Without --sdk, the SDK comes from its registry by version alone.
        let (file, wants) = match language {
            "rust" => ("Cargo.toml", "capwasm-provider-sdk = \"0.2.0-dev\""),
            "python" => ("requirements.txt", "capwasm-provider-sdk==0.2.0.dev0"),
            _ => ("package.json", "\"capwasm-provider-sdk\": \"0.2.0-dev\""),
        };
        let text = std::fs::read_to_string(project.join(file)).expect("the manifest");
        assert!(text.contains(wants), "{name} {file}:\n{text}");
        for (path, bytes) in contents(&project) {
            let text = String::from_utf8_lossy(&bytes);
            assert!(
                !text.contains("../sdk")
                    && !text.contains("find-links")
                    && !text.contains("[patch"),
                "{name}: {} points at a local SDK",
                path.display()
            );
        }
    }
}
