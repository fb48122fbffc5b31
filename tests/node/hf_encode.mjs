// The Hugging Face tokenizer's ids for each text: node hf_encode.mjs tokenizer.json texts.json,
// texts.json an array of strings; prints a JSON array of id arrays (tests/python/test_bpe_reference.py).
import { readFileSync } from "node:fs";
import { Tokenizer } from "@huggingface/tokenizers";

const [tokenizerPath, textsPath] = process.argv.slice(2);
const tokenizer = new Tokenizer(JSON.parse(readFileSync(tokenizerPath, "utf8")), {});
const texts = JSON.parse(readFileSync(textsPath, "utf8"));
const ids = texts.map((text) => tokenizer.encode(text, { add_special_tokens: false }).ids);
process.stdout.write(JSON.stringify(ids));
