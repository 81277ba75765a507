/**
 * skillopt-sleep's permission gate for a Pi replay (loaded with `pi -e <this file>`).
 *
 * Pi asks no permission of its own: a replay that offers the live agent's tools (read,
 * bash, edit, write) loads this gate, which does what a headless run of the other agent CLIs
 * does with a call no one approves. A write or an edit outside the working folder (the
 * replay's copy of the project) is blocked; every shell command is blocked (it would need
 * an approval: it could reach the network or write anywhere). Reads are left to Pi. A
 * blocked call's result says "skillopt-sleep: stopped", which the backend records.
 */

import { isAbsolute, relative, resolve } from "node:path";

export default function (pi: any) {
	pi.on("tool_call", async (event: any, ctx: any) => {
		const name = String(event.toolName || "");
		const input = event.input || {};
		if (name === "bash") {
			return { block: true, reason: `skillopt-sleep: stopped: \`${String(input.command || "")}\` needs an approval a replay never gives` };
		}
		if (name === "write" || name === "edit") {
			const root = resolve(ctx.cwd || process.cwd());
			const target = resolve(root, String(input.path || ""));
			const rel = relative(root, target);
			if (rel.startsWith("..") || isAbsolute(rel)) {
				return { block: true, reason: `skillopt-sleep: stopped: ${target} is outside the replay's working copy` };
			}
		}
		return undefined;
	});
}
