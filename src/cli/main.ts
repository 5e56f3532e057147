/**
 * The `mooring` command line (docs/cli.md): `run`, `attach`, `sessions`, `tasks`, `gate`, `acp`, `serve`.
 * Usage errors exit 2; every other exit code is in exit-codes.ts.
 */
import { Command, CommanderError, Option } from "commander";
import { taskStatuses } from "../client/types.js";
import { acpCommand } from "./acp-command.js";
import { attachCommand } from "./attach-command.js";
import { defaultUrl } from "./connection.js";
import { ExitCode } from "./exit-codes.js";
import * as resources from "./resource-commands.js";
import { runCommand } from "./run-command.js";
import { serveCommand } from "./serve-command.js";
import { escapesFor, visible } from "./terminal-text.js";
import { cliVersion } from "./version.js";

/** --url, --token and --connect-timeout on every command that talks to a gateway. No default is shown for the token. */
function withConnection(command: Command): Command {
  return command
    .option("--url <url>", `the gateway (env MOORING_URL, default ${defaultUrl})`)
    .option(
      "--token <token>",
      "bearer token (env MOORING_TOKEN, preferred: an argument shows in ps); never printed",
    )
    .option(
      "--connect-timeout <ms>",
      "how long a call retries an unreachable or starting gateway before exit 5 (env MOORING_CONNECT_TIMEOUT_MS, default 30000)",
    );
}

const rawOption = () =>
  new Option(
    "--raw",
    "write the gateway's text to stdout unchanged even on a terminal (else control characters are made visible)",
  );

/** Commander's own output (help, usage errors quoting an argument) made visible on a terminal too. */
const visibleOn =
  (stream: NodeJS.WriteStream) =>
  (text: string): void => {
    stream.write(escapesFor(stream) ? visible(text) : text);
  };

const transportOption = () =>
  new Option("--transport <transport>", "how to stream events").choices(["ws", "sse", "poll"]).default("ws");

export function buildProgram(): Command {
  const program = new Command("mooring")
    .description("Run and follow turns on a mooring gateway (docs/cli.md)")
    .version(cliVersion(), "-V, --version", "print the version of mooring")
    .showHelpAfterError()
    .configureOutput({ writeOut: visibleOn(process.stdout), writeErr: visibleOn(process.stderr) })
    .exitOverride();

  withConnection(
    program
      .command("run")
      .description("submit a turn and stream its answer to stdout (status on stderr)")
      .argument("[prompt]", 'the prompt; "-" or absent reads it from stdin')
      .option("-w, --workspace <dir>", "the session's folder (default: the current folder)")
      .option("-a, --agent <name>", "the agent (env MOORING_AGENT, default claude-code)")
      .option("-s, --session <id>", "submit to this session")
      .option(
        "-c, --continue",
        "submit to the latest open session on this workspace and agent (else a new one)",
      )
      .addOption(
        new Option("--if-busy <policy>", "when the session is busy").choices([
          "enqueue",
          "reject",
          "interrupt",
          "steer",
        ]),
      )
      .option(
        "--steer",
        "add the prompt to the session's running turn when it has one (--if-busy steer), else submit it as a turn",
      )
      .addOption(
        new Option("--load-class <class>", "the turn's deadline class").choices(["short", "long", "complex"]),
      )
      .option("--idempotency-key <key>", "a key that makes a repeated submit return the same task")
      .option("-d, --detach", "print the task id and exit without following")
      .option("--json", "one JSON object per line: events, cli.state, and a last cli.result")
      .addOption(rawOption())
      .addOption(transportOption()),
  ).action((prompt, options) => runCommand(prompt, options));

  withConnection(
    program
      .command("attach")
      .description("replay and follow a task, resuming after the last event this machine printed")
      .argument("<taskId>", "the task")
      .option("--from-start", "replay from the task's first event, ignoring the saved cursor")
      .option("--json", "one JSON object per line: events, cli.state, and a last cli.result")
      .addOption(rawOption())
      .addOption(transportOption()),
  ).action((taskId, options) => attachCommand(taskId, options));

  const sessions = program.command("sessions").description("list, show or archive sessions");
  withConnection(sessions.command("list").description("sessions, newest first"))
    .option("--workspace <dir>", "only this workspace")
    .addOption(new Option("--status <status>", "only this status").choices(["idle", "busy", "archived"]))
    .option("--limit <n>", "at most this many (default 50)")
    .option("--json", "JSON lines")
    .addOption(rawOption())
    .action((options) => resources.sessionsList(options));
  withConnection(
    sessions.command("get").argument("<sessionId>").description("a session with its recent turns"),
  )
    .option("--json", "JSON")
    .addOption(rawOption())
    .action((id, options) => resources.sessionsGet(id, options));
  withConnection(sessions.command("archive").argument("<sessionId>").description("archive a session"))
    .option("--json", "JSON")
    .addOption(rawOption())
    .action((id, options) => resources.sessionsArchive(id, options));

  withConnection(
    program
      .command("fork")
      .argument("<sessionId>")
      .description("fork a session at a turn (default: its last completed one) into a new session"),
  )
    .option("--at-turn <n>", "the last turn (turnIndex) the fork carries")
    .option("--title <title>", "the new session's title (default: the source's)")
    .option("--json", "JSON")
    .addOption(rawOption())
    .action((id, options) => resources.sessionsFork(id, options));
  withConnection(
    program
      .command("rollback")
      .argument("<sessionId>")
      .description("drop the last completed turns of an idle session from its conversation"),
  )
    .option("--turns <n>", "how many turns (default 1)")
    .option("--json", "JSON")
    .addOption(rawOption())
    .action((id, options) => resources.sessionsRollback(id, options));

  const tasks = program.command("tasks").description("list, show or cancel tasks");
  withConnection(tasks.command("list").description("tasks, newest first"))
    .option("--session <id>", "only this session's")
    .addOption(new Option("--status <status>", "only this status").choices(taskStatuses))
    .option("--limit <n>", "at most this many (default 50)")
    .option("--json", "JSON lines")
    .addOption(rawOption())
    .action((options) => resources.tasksList(options));
  withConnection(tasks.command("get").argument("<taskId>").description("a task"))
    .option("--json", "JSON")
    .addOption(rawOption())
    .action((id, options) => resources.tasksGet(id, options));
  withConnection(tasks.command("cancel").argument("<taskId>").description("cancel a task (idempotent)"))
    .option("--json", "JSON")
    .addOption(rawOption())
    .action((id, options) => resources.tasksCancel(id, options));

  withConnection(
    program.command("diff").argument("<taskId>").description("what a turn changed in its workspace (docs/api.md, Workspace checkpoints)"),
  )
    .option("--stat", "only the changed files and their line counts")
    .option("--json", "JSON, one line per page")
    .addOption(rawOption())
    .action((id, options) => resources.diff(id, options));
  withConnection(
    program
      .command("revert")
      .argument("<sessionId>")
      .description("restore the workspace to the checkpoint before a turn (the session must be idle)"),
  )
    .option("--to-turn <n>", "the turn whose \"before\" checkpoint to restore")
    .option("--unrevert", "undo the newest revert")
    .option("--path <path...>", "only these files or folders, relative to the workspace")
    .option("--force", "overwrite files changed since the last checkpoint")
    .option("--json", "JSON")
    .addOption(rawOption())
    .action((id, options) => resources.revert(id, options));

  withConnection(program.command("gate").description("the admission gate: running and queued tasks, limits"))
    .option("--json", "JSON")
    .action((options) => resources.gate(options));

  withConnection(
    program
      .command("acp")
      .description("an ACP agent on stdin/stdout for editors, relaying to the gateway (docs/acp-server.md)")
      .option(
        "-a, --agent <name>",
        "the agent of new sessions (env MOORING_ACP_AGENT, else MOORING_AGENT, default claude-code)",
      )
      .option("--agent-config <json>", "the agentConfig of new sessions, a JSON object"),
  ).action((options) => acpCommand(options));

  program
    .command("serve")
    .description(
      "start the gateway as `npm start` does (configured by environment variables, see docs/configuration.md)",
    )
    .action(() => serveCommand());

  return program;
}

export async function main(argv: string[] = process.argv): Promise<void> {
  // A reader that went away (`| head -1`) is not an error worth a stack trace; the task runs on.
  process.stdout.on("error", (err: NodeJS.ErrnoException) => {
    if (err.code === "EPIPE") process.exit(141);
    throw err;
  });
  try {
    await buildProgram().parseAsync(argv);
  } catch (err) {
    if (err instanceof CommanderError) {
      process.exit(err.exitCode === 0 ? 0 : ExitCode.usage);
    }
    throw err;
  }
}
