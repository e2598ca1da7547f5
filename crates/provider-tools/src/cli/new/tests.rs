use super::*;

const WORLDS: [WorldArg; 3] = [
    WorldArg::Bootstrap,
    WorldArg::Infrastructure,
    WorldArg::Platform,
];
const LANGUAGES: [Language; 3] = [Language::Rust, Language::Python, Language::Typescript];
/// Every key the templates are filled in at.
const PLACEHOLDERS: [&str; 17] = [
    "name",
    "world",
    "language",
    "what",
    "change",
    "build",
    "wasm",
    "fixture",
    "conformance",
    "pool",
    "sdk_version",
    "sdk_source",
    "features",
    "dependencies",
    "main_ext",
    "disable",
    "capabilities",
];

#[test]
fn every_placeholder_of_the_templates_is_known() {
    let templates = [
        include_str!("../../../templates/README.md"),
        include_str!("../../../templates/providermodule.yaml"),
        include_str!("../../../templates/rust/Cargo.toml"),
        include_str!("../../../templates/rust/config.toml"),
        include_str!("../../../templates/python/build.sh"),
        include_str!("../../../templates/python/requirements.txt"),
        include_str!("../../../templates/typescript/package.json"),
        include_str!("../../../templates/typescript/tsconfig.json"),
    ];
    for text in templates {
        for (at, _) in text.match_indices("{{") {
            let key = text[at + 2..].split("}}").next().unwrap_or_default();
            assert!(PLACEHOLDERS.contains(&key), "unknown placeholder {key:?}");
        }
    }
}

fn supported(world: WorldArg, language: Language) -> bool {
    language == Language::Rust || world != WorldArg::Platform
}

#[test]
fn every_supported_pair_is_written_with_no_placeholder_left() {
    for world in WORLDS {
        for language in LANGUAGES {
            for sdk in [SdkSource::Registry, SdkSource::Local("/sdk".into())] {
                let made = project("my-provider", world, language, &sdk);
                if !supported(world, language) {
                    assert!(
                        matches!(made, Err(Refusal::Unsupported { .. })),
                        "{world:?} {language:?}"
                    );
                    continue;
                }
                let files = made.unwrap_or_else(|e| panic!("{world:?} {language:?}: {e}"));
                for file in &files {
                    assert!(
                        !PLACEHOLDERS
                            .iter()
                            .any(|key| file.text.contains(&format!("{{{{{key}}}}}"))),
                        "{world:?} {language:?} {}: a placeholder is left",
                        file.path
                    );
                }
                let all: String = files.iter().map(|f| f.text.as_str()).collect();
                assert!(!all.contains("../sdk/"), "{world:?} {language:?}");
                assert!(
                    files
                        .iter()
                        .any(|f| f.path.starts_with("fixtures/") && f.text.contains("\"expect\""))
                        || world == WorldArg::Infrastructure,
                    "{world:?} {language:?}: no fixture says what it expects"
                );
                if let SdkSource::Local(_) = sdk {
                    assert!(all.contains("/sdk"), "{world:?} {language:?}: --sdk unused");
                }
            }
        }
    }
}

#[test]
fn the_project_reports_its_own_name() {
    for (world, language, file) in [
        (WorldArg::Bootstrap, Language::Python, "src/app.py"),
        (WorldArg::Infrastructure, Language::Python, "src/app.py"),
        (WorldArg::Bootstrap, Language::Typescript, "src/app.ts"),
        (WorldArg::Infrastructure, Language::Typescript, "src/app.js"),
        (WorldArg::Bootstrap, Language::Rust, "Cargo.toml"),
        (WorldArg::Infrastructure, Language::Rust, "Cargo.toml"),
        (WorldArg::Platform, Language::Rust, "Cargo.toml"),
    ] {
        let files = project("acme-cloud", world, language, &SdkSource::Registry)
            .unwrap_or_else(|e| panic!("{e}"));
        let text = files
            .iter()
            .find(|f| f.path == file)
            .map(|f| f.text.as_str())
            .unwrap_or_default();
        assert!(text.contains("acme-cloud"), "{world:?} {language:?} {file}");
    }
}

#[test]
fn names_that_cannot_name_a_package_are_refused() {
    for bad in [
        "",
        "Caps",
        "1st",
        "a_b",
        "end-",
        "../x",
        "a b",
        &"a".repeat(64),
    ] {
        assert!(
            matches!(
                project(
                    bad,
                    WorldArg::Bootstrap,
                    Language::Rust,
                    &SdkSource::Registry
                ),
                Err(Refusal::Name(_))
            ),
            "{bad:?}"
        );
    }
    assert!(valid_name("my-provider2"));
}

#[test]
fn a_directory_holding_anything_is_refused_and_left_as_it_was() {
    let parent = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = parent.path().join("p");
    std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.join("keep"), "mine").unwrap_or_else(|e| panic!("{e}"));
    let files = vec![File::new("README.md", "x")];
    let refused = write(&dir, &files).map_err(|e| e.to_string());
    assert!(
        refused.as_ref().is_err_and(|e| e.contains("is not empty")),
        "{refused:?}"
    );
    let left: Vec<_> = std::fs::read_dir(parent.path())
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left, [std::ffi::OsString::from("p")]);
    let inside: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    assert_eq!(inside, [std::ffi::OsString::from("keep")]);
    assert_eq!(
        std::fs::read_to_string(dir.join("keep")).ok().as_deref(),
        Some("mine")
    );

    // An empty one is filled.
    let empty = parent.path().join("empty");
    std::fs::create_dir(&empty).unwrap_or_else(|e| panic!("{e}"));
    write(&empty, &files).unwrap_or_else(|e| panic!("{e}"));
    assert!(empty.join("README.md").is_file());
}
