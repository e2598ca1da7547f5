//! What each provider world may import, linked once per engine.

use wasmtime::Engine;
use wasmtime::component::{HasSelf, Linker};
use wasmtime_wasi::cli::{WasiCli, WasiCliView as _};
use wasmtime_wasi::filesystem::{WasiFilesystem, WasiFilesystemView as _};
use wasmtime_wasi::p2::bindings::{cli, filesystem, random, sockets};
use wasmtime_wasi::random::{WasiRandom, WasiRandomView as _};
use wasmtime_wasi::sockets::{WasiSockets, WasiSocketsView as _};

use super::bindings::{bootstrap_tokens, log, types};
use super::state::CallState;
use super::world::World;

/// What a component of each world may import, and nothing else: a
/// component importing anything outside its world (a bootstrap provider
/// importing `wasi:http`, say) fails to load, its message naming the import.
pub(crate) struct Linkers {
    bootstrap: Linker<CallState>,
    infrastructure: Linker<CallState>,
}

impl Linkers {
    pub(crate) fn new(engine: &Engine) -> wasmtime::Result<Self> {
        let mut bootstrap = linker(engine)?;
        // Only a bootstrap provider may ask for a bootstrap token (the
        // platform world shares this linker; loading refuses the import there).
        bootstrap_tokens::add_to_linker::<_, HasSelf<_>>(&mut bootstrap, |s| s)?;
        let mut infrastructure = linker(engine)?;
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut infrastructure)?;
        Ok(Self {
            bootstrap,
            infrastructure,
        })
    }

    /// The linker of `world`.
    pub(crate) fn of(&self, world: World) -> &Linker<CallState> {
        match world {
            // Neither may reach the network.
            World::Bootstrap | World::Platform => &self.bootstrap,
            World::Infrastructure | World::ControlPlane => &self.infrastructure,
        }
    }
}

/// What every provider world imports — `log`, clocks and random — plus what
/// the toolchains' runtimes import (Rust's standard library, CPython under
/// componentize-py, SpiderMonkey under componentize-js): `wasi:cli`,
/// `wasi:io`, insecure random, `wasi:filesystem` and `wasi:sockets`, all
/// backed by an empty context: no preopened directory, so every path fails
/// to open; no environment; sockets refused for every address and lookup.
fn linker(engine: &Engine) -> wasmtime::Result<Linker<CallState>> {
    let mut linker = Linker::new(engine);
    let l = &mut linker;
    log::add_to_linker::<_, HasSelf<_>>(l, |s| s)?;
    types::add_to_linker::<_, HasSelf<_>>(l, |s| s)?;
    // io, clocks, random, stdin/stdout/stderr: their waits are async.
    wasmtime_wasi::p2::add_to_linker_proxy_interfaces_async(l)?;
    cli::exit::add_to_linker::<_, WasiCli>(l, CallState::cli)?;
    cli::environment::add_to_linker::<_, WasiCli>(l, CallState::cli)?;
    cli::terminal_input::add_to_linker::<_, WasiCli>(l, CallState::cli)?;
    cli::terminal_output::add_to_linker::<_, WasiCli>(l, CallState::cli)?;
    cli::terminal_stdin::add_to_linker::<_, WasiCli>(l, CallState::cli)?;
    cli::terminal_stdout::add_to_linker::<_, WasiCli>(l, CallState::cli)?;
    cli::terminal_stderr::add_to_linker::<_, WasiCli>(l, CallState::cli)?;
    // The standard library seeds its hash maps from these.
    random::insecure::add_to_linker::<_, WasiRandom>(l, CallState::random)?;
    random::insecure_seed::add_to_linker::<_, WasiRandom>(l, CallState::random)?;
    filesystem::types::add_to_linker::<_, WasiFilesystem>(l, CallState::filesystem)?;
    filesystem::preopens::add_to_linker::<_, WasiFilesystem>(l, CallState::filesystem)?;
    sockets::tcp::add_to_linker::<_, WasiSockets>(l, CallState::sockets)?;
    sockets::udp::add_to_linker::<_, WasiSockets>(l, CallState::sockets)?;
    sockets::tcp_create_socket::add_to_linker::<_, WasiSockets>(l, CallState::sockets)?;
    sockets::udp_create_socket::add_to_linker::<_, WasiSockets>(l, CallState::sockets)?;
    sockets::instance_network::add_to_linker::<_, WasiSockets>(l, CallState::sockets)?;
    sockets::network::add_to_linker::<_, WasiSockets>(
        l,
        &sockets::network::LinkOptions::default(),
        CallState::sockets,
    )?;
    sockets::ip_name_lookup::add_to_linker::<_, WasiSockets>(l, CallState::sockets)?;
    Ok(linker)
}
