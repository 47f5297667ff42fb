"""The `openai` back end (served): candidates and judges behind an OpenAI-compatible chat endpoint
(`vllm serve`, SGLang, a provider), instead of weights loaded into this process.

Start-up asks the server what it is (`/models`, `/version`) and whether it tokenises for us
(which sampling fields it takes); a judge's also asks how labels can be read from it (a
candidate's does not, `engine.reads_labels`: it only chats, so a chat API that cannot judge
still serves a candidate):
- **first_token**, where the server tokenises for us (vLLM's `/tokenize`, `/detokenize`): the
  labels' first tokens are found by the same rules as the offline engines
  (`labels.label_readout_for`, on the server's tokenizer and chat template), and each verdict
  is one decoding step restricted to them (`allowed_token_ids`) whose `top_logprobs` are
  renormalised over the labels. Exact when the server runs with `--logprobs-mode
  processed_logprobs` (the top log-probabilities are then the restricted ones, as offline);
  with raw log-probabilities the labels are read from the top 20 and a warning says so.
  The API returns at most 20 log-probabilities: where labels have more counted spellings
  (the verdict labels have at most 16), the step is restricted to 20 of them, the least likely spellings left out
  (`readout.read_spellings`), with a warning, and the tokens read are in the judge's identity.
- **structured_choice** otherwise: the output is constrained to one label (vLLM's
  `structured_outputs: {choice}`, else a `response_format` JSON schema with an enum) and the
  distribution is one-hot.
- A server offering neither is refused as a judge before any request of the run is sent.

Every request pins the sampling fields the readout depends on (`sampling_fields`): `vllm serve`
fills each field a request leaves unset from the model's `generation_config.json` (a repetition
penalty reaches prompt tokens, and every label word is in the judge's instructions), so a
verdict is read with the offline engine's neutral values whoever started the server, and a
candidate samples with its config's `sampling`, neutral otherwise, as offline.

Requests go out in the order given (the judge stage's prefix-sharing order), at most
`max_concurrency` in flight (asyncio + a semaphore, so Ctrl-C cancels every request in flight
at once). Every request, start-up ones included, is re-sent after a timeout, a dropped
connection, 408, 429 or 5xx with exponential backoff and full jitter, `retries` times; one
still failing is no answer and no verdict: it comes back marked failed (`Completion.failure`,
never a placeholder answer; `Classification.failure`, never an `invalid` verdict, which would
score as missing and never be asked again), the stage keeps the others and says how many
failed, and the rerun asks only those. A server that stops accepting connections
stops the stage after what came back is kept. Any other 4xx is the request's fault and stops
the stage naming it. The start-up (`engine.start_up`, a `Startup`) runs once where a stage
builds the engine, which hands it to the judge's settings identity (`Startup.settings_identity`)
and to the engine (`OpenAIEngine(spec, startup)`): the readout in the hash is the one the engine
uses.
The API key comes only from the variable `api_key_env` names; it, a URL's credentials and
key-like query parameters are redacted (`errors.redact`) from every message this module writes.
"""
