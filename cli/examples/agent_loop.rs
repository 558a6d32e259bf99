//! Your own agent loop: one Sandbox keeps variables between cells, each
//! cell with its own call budget. Here the "model" is a list of three
//! cells; the second reads what the first left, the third what both did.
//!
//! `cargo run -p code-mode --example agent_loop -- ./target/debug/code-mode-test-server`

use code_mode::{Bridge, Error, Sandbox, Server};

/// Run three cells in one Sandbox over `server`; what each printed.
pub async fn agent_loop(server: &str) -> Result<Vec<String>, Error> {
    let bridge = Bridge::start(Server::command(server).allow(["add"])).await?;
    let sandbox = Sandbox::new(&bridge).await?;
    let cells = [
        "import json\ntotal = 0",
        "for n in range(3):\n    total = json.loads(await add({'a': total, 'b': n}))['sum']\nprint(total)",
        "print('total is still', total)",
    ];
    let mut printed = Vec::new();
    for code in cells {
        // The model would read each report before writing the next cell.
        let report = sandbox.run(code, bridge.budget(5)).await?;
        printed.push(report.stdout);
    }
    sandbox.close().await;
    bridge.close().await;
    Ok(printed) // ["", "3\n", "total is still 3\n"]
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let server = std::env::args().nth(1).unwrap_or_else(|| "./target/debug/code-mode-test-server".into());
    for printed in agent_loop(&server).await? {
        print!("{printed}");
    }
    Ok(())
}
