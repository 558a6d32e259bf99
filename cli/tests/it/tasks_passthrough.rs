//! MCP Tasks (the tasks extension, SEP-2663) of wrapped servers: the
//! conformance suite's ten `tasks-*` server scenarios against
//! `code-mode-test-server --tasks` alone, the measure for code-mode in
//! front of it.

use crate::conformance::tasks_scenarios_pass;
use crate::upstream::Server;

#[tokio::test]
async fn the_test_servers_task_fixtures_pass_the_ten_tasks_scenarios_alone() {
    let server = Server::start(0, &["--tasks"]);
    tasks_scenarios_pass("code-mode-test-server --tasks alone", &server.url).await;
}
