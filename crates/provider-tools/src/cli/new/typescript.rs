//! The TypeScript project of each world it binds.

use super::{File, Refusal, SDK_VERSION, SdkSource, WorldArg, fill, quoted, rewrite};

macro_rules! source {
    ($to:literal, $guest:literal, $file:literal) => {
        File::new(
            concat!($to, "/", $file),
            include_str!(concat!("../../../../../guests/js/", $guest, "/", $file)),
        )
    };
}

/// The guests import the SDK by path; a project imports the package.
const IMPORTS: [(&str, &str); 4] = [
    ("'../sdk/capwasm-provider.ts'", "'capwasm-provider-sdk'"),
    ("'../sdk/exports.ts'", "'capwasm-provider-sdk/exports'"),
    ("'../sdk/log.ts'", "'capwasm-provider-sdk/log'"),
    ("'../sdk/http.ts'", "'capwasm-provider-sdk/http'"),
];

/// `text` importing the SDK package; every import of it is rewritten.
fn imports(template: &'static str, text: &str) -> Result<String, Refusal> {
    let mut out = text.to_owned();
    for (from, to) in IMPORTS {
        out = out.replace(from, to);
    }
    if out.contains("'../sdk/") {
        return Err(Refusal::Template(template, "'../sdk/"));
    }
    Ok(out)
}

pub(super) fn files(name: &str, world: WorldArg, sdk: &SdkSource) -> Result<Vec<File>, Refusal> {
    let info = format!("({{ name: '{name}', version: '0.1.0' }})");
    let (mut files, main, has_tests) = match world {
        WorldArg::Bootstrap => {
            let mut app = source!("src", "kubeadm-bootstrap", "app.ts");
            app.text = rewrite(
                "typescript bootstrap",
                &app.text,
                "({ name: 'kubeadm-bootstrap-js', version: '0.1.0' })",
                &info,
            )?;
            let mut tests = source!("test", "kubeadm-bootstrap", "kubeadm.test.ts");
            tests.text = rewrite(
                "typescript bootstrap tests",
                &tests.text,
                "'./kubeadm.ts'",
                "'../src/kubeadm.ts'",
            )?;
            (
                vec![
                    app,
                    source!("src", "kubeadm-bootstrap", "kubeadm.ts"),
                    source!("src", "kubeadm-bootstrap", "yaml.ts"),
                    File::new(
                        "src/schema.json",
                        include_str!("../../../../../guests/kubeadm-bootstrap/src/schema.json"),
                    ),
                    tests,
                ],
                "ts",
                true,
            )
        }
        // Platform is refused before this.
        WorldArg::Infrastructure | WorldArg::Platform => {
            let mut app = source!("src", "sim-infrastructure", "app.js");
            app.text = rewrite(
                "typescript infrastructure",
                &app.text,
                "{ name: 'sim-infrastructure-js', version: '0.1.0' }",
                &format!("{{ name: '{name}', version: '0.1.0' }}"),
            )?;
            (
                vec![
                    app,
                    File::new(
                        "src/schema.json",
                        include_str!("../../../../../guests/sim-infrastructure/src/schema.json"),
                    ),
                ],
                "js",
                false,
            )
        }
    };
    for file in &mut files {
        if std::path::Path::new(file.path)
            .extension()
            .is_none_or(|e| e != "json")
        {
            file.text = imports(file.path, &file.text)?;
        }
    }
    let sdk_source = match sdk {
        SdkSource::Registry => quoted(SDK_VERSION),
        SdkSource::Local(path) => quoted(&format!("file:{path}")),
    };
    // The bootstrap world grants no HTTP: leave out the engine's fetch.
    let disable = match world {
        WorldArg::Bootstrap => "fetch-event http",
        WorldArg::Infrastructure | WorldArg::Platform => "fetch-event",
    };
    let mut package = fill(
        include_str!("../../../templates/typescript/package.json"),
        &[
            ("name", name),
            ("world", world.as_str()),
            ("main_ext", main),
            ("disable", disable),
            ("sdk_source", &sdk_source),
        ],
    );
    if !has_tests {
        package = rewrite(
            "typescript package.json",
            &package,
            "npm run check && npm test && ",
            "npm run check && ",
        )?;
    }
    files.push(File::new("package.json", package));
    files.push(File::new(
        "tsconfig.json",
        fill(
            include_str!("../../../templates/typescript/tsconfig.json"),
            &[("world", world.as_str())],
        ),
    ));
    files.push(File::new(
        ".gitignore",
        include_str!("../../../templates/typescript/gitignore"),
    ));
    Ok(files)
}
