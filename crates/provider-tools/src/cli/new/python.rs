//! The Python project of each world it binds.

use super::{File, PYTHON_SDK_VERSION, Refusal, SdkSource, WorldArg, fill, rewrite};

macro_rules! source {
    ($to:literal, $guest:literal, $file:literal) => {
        File::new(
            concat!($to, "/", $file),
            include_str!(concat!("../../../../../guests/python/", $guest, "/", $file)),
        )
    };
}

pub(super) fn files(name: &str, world: WorldArg, sdk: &SdkSource) -> Result<Vec<File>, Refusal> {
    let info = format!("exports.info({name:?}, \"0.1.0\")");
    let mut files = match world {
        WorldArg::Bootstrap => {
            let mut app = source!("src", "kubeadm-bootstrap", "app.py");
            app.text = rewrite(
                "python bootstrap",
                &app.text,
                "exports.info(\"kubeadm-bootstrap-python\", \"0.1.0\")",
                &info,
            )?;
            vec![
                app,
                source!("src", "kubeadm-bootstrap", "kubeadm.py"),
                source!("src", "kubeadm-bootstrap", "yamlout.py"),
                File::new(
                    "src/schema.json",
                    include_str!("../../../../../guests/kubeadm-bootstrap/src/schema.json"),
                ),
                source!("tests", "kubeadm-bootstrap", "test_kubeadm.py"),
            ]
        }
        // Platform is refused before this.
        WorldArg::Infrastructure | WorldArg::Platform => {
            let mut app = source!("src", "sim-infrastructure", "app.py");
            app.text = rewrite(
                "python infrastructure",
                &app.text,
                "exports.info(\"sim-infrastructure-python\", \"0.1.0\")",
                &info,
            )?;
            vec![
                app,
                source!("src", "sim-infrastructure", "sim.py"),
                File::new(
                    "src/schema.json",
                    include_str!("../../../../../guests/sim-infrastructure/src/schema.json"),
                ),
                source!("tests", "sim-infrastructure", "test_sim.py"),
            ]
        }
    };
    let sdk_source = match sdk {
        SdkSource::Registry => String::new(),
        // pip reads options in a requirements file; the index is still
        // asked for componentize-py.
        SdkSource::Local(path) => format!("--find-links {path}\n"),
    };
    let values = [
        ("name", name),
        ("world", world.as_str()),
        ("sdk_version", PYTHON_SDK_VERSION),
        ("sdk_source", sdk_source.as_str()),
    ];
    files.push(File::new(
        "requirements.txt",
        fill(
            include_str!("../../../templates/python/requirements.txt"),
            &values,
        ),
    ));
    let mut build = File::new(
        "build.sh",
        fill(include_str!("../../../templates/python/build.sh"), &values),
    );
    build.executable = true;
    files.push(build);
    files.push(File::new(
        ".gitignore",
        include_str!("../../../templates/python/gitignore"),
    ));
    Ok(files)
}
