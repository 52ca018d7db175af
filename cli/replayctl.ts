#!/usr/bin/env node
import { main } from "./main.js";

// No process.exit: it could cut off output still being written to a pipe.
process.exitCode = await main(process.argv.slice(2), process.env);
