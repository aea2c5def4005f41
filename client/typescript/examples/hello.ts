import { Client, work } from "@opsq/client";
const opsq = new Client({ baseURL: process.env.OPSQ_URL, key: process.env.OPSQ_KEY }); // default http://localhost:3999
const { id } = await opsq.submit({ chunks: ["hello", "world"] });
await work(opsq, async (chunk) => chunk.input!.toUpperCase(), { concurrency: 4, once: true, wait: "1s" });
for await (const line of opsq.results(id)) console.log(line); // { chunk_index: 0, output: 'HELLO' } …
