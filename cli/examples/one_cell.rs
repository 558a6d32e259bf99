//! One cell in a fresh sandbox, through the bridge: start a wrapped server,
//! read its stubs, run code that calls a tool.
//!
//! `cargo run -p code-mode --example one_cell -- ./target/debug/code-mode-test-server`

use code_mode::{Bridge, Error, Server, run_code};

/// Start `server`, print its stubs, run one cell; what the cell printed.
pub async fn one_cell(server: &str) -> Result<String, Error> {
    let bridge = Bridge::start(Server::command(server).allow(["add", "echo"])).await?;
    println!("{}", bridge.stubs()); // for your own prompt
    let cell = run_code(&bridge, "print(await add({'a': 2, 'b': 3}))").await?;
    bridge.close().await;
    Ok(cell.stdout) // {"sum":5}
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let server = std::env::args().nth(1).unwrap_or_else(|| "./target/debug/code-mode-test-server".into());
    print!("{}", one_cell(&server).await?);
    Ok(())
}
