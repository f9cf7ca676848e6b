// The rows of the framework matrix: each framework's own calls, unchanged except for the base
// URL, for the matrix's cells (tests/frameworks/matrix.mjs):
//   chat(stream)   a 4-turn chat, each turn's reply appended the framework's way; returns each
//                  turn's { text, prompt, cached } as the framework's own usage field tells them
//                  (cached null where a streamed turn carries no usage).
//   tools(weather) a tool loop: the first call forced, the tool executed by the framework (or the
//                  SDK's caller) and its result fed back, at most 4 model calls; returns the text
//                  of the last answer.
//   structured()   the framework's structured-output helper with a zod schema; returns the
//                  object it parsed.
//   options()      one turn with the options users commonly set (sampling, stop, user, caching
//                  and storage hints); returns its text.
// Random weights: the checks are properties of the exchange, not of the answers' quality.

export const SYSTEM = 'You are a terse assistant.';
export const TURNS = ['Hello there.', 'Tell me about the sea.', 'And the wind?', 'Thanks, goodbye.'];
export const ASK_WEATHER = 'What is the weather in Paris?';
export const ASK_OBJECT = 'Name a city and say whether it is sunny there.';
const CHAT_TOKENS = 8, TOOL_TOKENS = 64, OBJECT_TOKENS = 64;

export function schemas(z) {
  return {
    weather: z.object({ city: z.string().min(1).max(12), unit: z.enum(['celsius', 'fahrenheit']) }),
    // Only what every helper keeps: @anthropic-ai/sdk's zodOutputFormat moves length and range
    // bounds into descriptions, and a random model's unbounded string never closes.
    report: z.object({ city: z.enum(['Paris', 'Oslo', 'Lima']), sunny: z.boolean() }),
  };
}

const forecast = (args) => JSON.stringify({ city: args.city, temperature: 21, unit: args.unit });

// The official `openai` client's chat completions.
function openaiChat({ require, base }) {
  const { OpenAI } = require('openai');
  const { zodResponseFormat } = require('openai/helpers/zod');
  const { zodToJsonSchema } = jsonSchemaOf(require);
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'none', maxRetries: 0 });
  const req = { model: 'kamera', temperature: 0 };
  return {
    async chat(stream) {
      const messages = [{ role: 'system', content: SYSTEM }], turns = [];
      for (const content of TURNS) {
        messages.push({ role: 'user', content });
        let text = '', usage = null;
        if (stream) {
          const s = await client.chat.completions.create({ ...req, messages, max_completion_tokens: CHAT_TOKENS,
                                                            stream: true, stream_options: { include_usage: true } });
          for await (const c of s) { text += c.choices[0]?.delta?.content ?? ''; usage = c.usage ?? usage; }
        } else {
          const r = await client.chat.completions.create({ ...req, messages, max_completion_tokens: CHAT_TOKENS });
          text = r.choices[0].message.content;
          usage = r.usage;
        }
        messages.push({ role: 'assistant', content: text });
        turns.push({ text, prompt: usage?.prompt_tokens, cached: usage?.prompt_tokens_details?.cached_tokens ?? null });
      }
      return turns;
    },
    async tools(weather, onCall) {
      const tools = [{ type: 'function', function: { name: 'get_weather', description: 'The weather in a city',
                                                     parameters: zodToJsonSchema(weather), strict: true } }];
      const messages = [{ role: 'user', content: ASK_WEATHER }];
      for (let step = 0; step < 4; ++step) {
        const r = await client.chat.completions.create({ ...req, messages, tools, max_completion_tokens: TOOL_TOKENS,
                                                          parallel_tool_calls: false,
                                                          tool_choice: step === 0 ? 'required' : 'auto' });
        const msg = r.choices[0].message;
        messages.push(msg);
        if (!msg.tool_calls?.length) return msg.content;
        for (const c of msg.tool_calls)
          messages.push({ role: 'tool', tool_call_id: c.id, content: forecast(onCall(JSON.parse(c.function.arguments))) });
      }
      throw new Error('no answer within 4 model calls');
    },
    async structured(report) {
      const r = await client.chat.completions.parse({
        ...req, messages: [{ role: 'user', content: ASK_OBJECT }], max_completion_tokens: OBJECT_TOKENS,
        response_format: zodResponseFormat(report, 'report') });
      return r.choices[0].message.parsed;
    },
    async options() {
      const r = await client.chat.completions.create({
        ...req, messages: [{ role: 'user', content: ASK_WEATHER }], max_completion_tokens: CHAT_TOKENS, top_p: 0.9,
        seed: 1, stop: ['\n\n'], presence_penalty: 0.1, frequency_penalty: 0.1, n: 1, user: 'u1',
        safety_identifier: 'u1', prompt_cache_key: 'k1', service_tier: 'auto', store: false, reasoning_effort: 'none',
        metadata: { run: 'matrix' }, logprobs: false });
      return r.choices[0].message.content;
    },
  };
}

// A Response's text (the SDK adds output_text to what create() returns, not to streamed events).
const outputText = (r) => r.output.filter((o) => o.type === 'message')
  .flatMap((o) => o.content).filter((c) => c.type === 'output_text').map((c) => c.text).join('');

// The official `openai` client's Responses API, the conversation kept by the client (its output
// items fed back as input).
function openaiResponses({ require, base }) {
  const { OpenAI } = require('openai');
  const { zodTextFormat } = require('openai/helpers/zod');
  const { zodToJsonSchema } = jsonSchemaOf(require);
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'none', maxRetries: 0 });
  const req = { model: 'kamera', temperature: 0, instructions: SYSTEM };
  return {
    async chat(stream) {
      const input = [], turns = [];
      for (const content of TURNS) {
        input.push({ role: 'user', content });
        let r;
        if (stream) {
          const s = await client.responses.create({ ...req, input, max_output_tokens: CHAT_TOKENS, stream: true });
          let text = '';
          for await (const e of s) {
            if (e.type === 'response.output_text.delta') text += e.delta;
            if (e.type === 'response.completed' || e.type === 'response.incomplete') r = e.response;
          }
          const whole = outputText(r);
          if (text !== whole) throw new Error(`deltas ${JSON.stringify(text)} != ${JSON.stringify(whole)}`);
        } else {
          r = await client.responses.create({ ...req, input, max_output_tokens: CHAT_TOKENS });
        }
        input.push(...r.output);
        turns.push({ text: outputText(r), prompt: r.usage.input_tokens, cached: r.usage.input_tokens_details.cached_tokens });
      }
      return turns;
    },
    async tools(weather, onCall) {
      const tools = [{ type: 'function', name: 'get_weather', description: 'The weather in a city',
                       parameters: zodToJsonSchema(weather), strict: true }];
      const input = [{ role: 'user', content: ASK_WEATHER }];
      for (let step = 0; step < 4; ++step) {
        const r = await client.responses.create({ ...req, input, tools, max_output_tokens: TOOL_TOKENS,
                                                  parallel_tool_calls: false,
                                                  tool_choice: step === 0 ? 'required' : 'auto' });
        input.push(...r.output);
        const calls = r.output.filter((o) => o.type === 'function_call');
        if (!calls.length) return r.output_text;
        for (const c of calls)
          input.push({ type: 'function_call_output', call_id: c.call_id, output: forecast(onCall(JSON.parse(c.arguments))) });
      }
      throw new Error('no answer within 4 model calls');
    },
    async structured(report) {
      const r = await client.responses.parse({
        ...req, input: ASK_OBJECT, max_output_tokens: OBJECT_TOKENS, text: { format: zodTextFormat(report, 'report') } });
      return r.output_parsed;
    },
    async options() {
      const r = await client.responses.create({
        ...req, input: ASK_WEATHER, max_output_tokens: CHAT_TOKENS, top_p: 0.9, user: 'u1', safety_identifier: 'u1',
        prompt_cache_key: 'k1', service_tier: 'auto', store: false, truncation: 'disabled', metadata: { run: 'matrix' },
        reasoning: { effort: 'none' }, include: [] });
      return outputText(r);
    },
  };
}

// The OpenAI Agents SDK: its default model (Responses) or its chat-completions model, chosen by
// the provider's useResponses, the conversation kept as the SDK keeps it (result.history).
function openaiAgents(useResponses) {
  return ({ require, base, imEnd }) => {
    const { OpenAI } = require('openai');
    const { Agent, Runner, OpenAIProvider, tool } = require('@openai/agents');
    const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'none', maxRetries: 0 });
    const runner = new Runner({ modelProvider: new OpenAIProvider({ openAIClient: client, useResponses }),
                                tracingDisabled: true });
    // The Agents SDK fails a run whose Responses reply was cut by max_output_tokens (status
    // "incomplete": ModelBehaviorError), so its Responses replies here end by themselves:
    // <|im_end|> made likely enough (logit_bias, through the SDK's providerData) that random
    // weights end in a few tokens. Its chat-completions model takes a cut reply but drops an
    // empty streamed one (no message: the runner asks again), so that row gets no bias.
    const bias = useResponses ? { providerData: { logit_bias: { [imEnd]: 4 } } } : {};
    const settings = (maxTokens, extra = {}) => ({ temperature: 0, maxTokens, parallelToolCalls: false, ...bias,
                                                   ...extra });
    const usageOf = (r) => {
      const u = r.rawResponses.at(-1).usage;
      const details = [u.inputTokensDetails].flat()[0] ?? {};
      return { prompt: u.inputTokens, cached: details.cached_tokens ?? null };
    };
    return {
      async chat(stream) {
        const agent = new Agent({ name: 'chat', instructions: SYSTEM, model: 'kamera',
                                  modelSettings: settings(useResponses ? TOOL_TOKENS : CHAT_TOKENS) });
        let history = [];
        const turns = [];
        for (const content of TURNS) {
          const input = [...history, { role: 'user', content }];
          const r = await runner.run(agent, input, { stream });
          let text = '';
          if (stream) {
            for await (const t of r.toTextStream()) text += t;
            await r.completed;
          } else {
            text = r.finalOutput;
          }
          history = r.history;
          turns.push({ text, ...usageOf(r) });
        }
        return turns;
      },
      async tools(weather, onCall) {
        const getWeather = tool({ name: 'get_weather', description: 'The weather in a city', parameters: weather,
                                  execute: async (args) => forecast(onCall(args)) });
        const agent = new Agent({ name: 'weather', model: 'kamera', tools: [getWeather],
                                  modelSettings: settings(TOOL_TOKENS, { toolChoice: 'required' }) });
        const r = await runner.run(agent, ASK_WEATHER, { maxTurns: 4 });
        return r.finalOutput;
      },
      async structured(report) {
        const agent = new Agent({ name: 'report', model: 'kamera', outputType: report, modelSettings: settings(OBJECT_TOKENS) });
        return (await runner.run(agent, ASK_OBJECT)).finalOutput;
      },
      async options() {
        const agent = new Agent({ name: 'options', model: 'kamera', modelSettings: settings(TOOL_TOKENS, {
          topP: 0.9, frequencyPenalty: 0.1, presencePenalty: 0.1, truncation: 'disabled', store: false,
          promptCacheRetention: 'in-memory', reasoning: { effort: 'none' }, text: { verbosity: 'medium' } }) });
        return (await runner.run(agent, ASK_WEATHER)).finalOutput;
      },
    };
  };
}

// The Vercel AI SDK (`ai`) with a provider: @ai-sdk/openai-compatible's chat model, or
// @ai-sdk/openai's default model (Responses).
function aiSdk(makeModel, providerOptions, oneCall, commonOptions) {
  return ({ require, base }) => {
    const { generateText, streamText, tool, stepCountIs, Output } = require('ai');
    const model = makeModel(require, `${base}/v1`);
    const usageOf = (u) => ({ prompt: u.inputTokens, cached: u.inputTokenDetails?.cacheReadTokens ?? null });
    return {
      async chat(stream) {
        const messages = [], turns = [];
        for (const content of TURNS) {
          messages.push({ role: 'user', content });
          const req = { model, system: SYSTEM, messages, temperature: 0, maxOutputTokens: CHAT_TOKENS, maxRetries: 0,
                        providerOptions };
          if (stream) {
            const r = streamText(req);
            const text = await r.text;
            messages.push(...(await r.response).messages);
            turns.push({ text, ...usageOf(await r.usage) });
          } else {
            const r = await generateText(req);
            messages.push(...r.response.messages);
            turns.push({ text: r.text, ...usageOf(r.usage) });
          }
        }
        return turns;
      },
      async tools(weather, onCall) {
        const r = await generateText({
          model, prompt: ASK_WEATHER, temperature: 0, maxOutputTokens: TOOL_TOKENS, maxRetries: 0,
          providerOptions: oneCall,
          tools: { get_weather: tool({ description: 'The weather in a city', inputSchema: weather,
                                       execute: async (args) => forecast(onCall(args)) }) },
          toolChoice: 'required', prepareStep: ({ stepNumber }) => (stepNumber > 0 ? { toolChoice: 'auto' } : {}),
          stopWhen: stepCountIs(4) });
        if (r.finishReason === 'tool-calls') throw new Error('no answer within 4 model calls');
        return r.text;
      },
      async structured(report) {
        const r = await generateText({ model, prompt: ASK_OBJECT, temperature: 0, maxOutputTokens: OBJECT_TOKENS,
                                       maxRetries: 0, providerOptions, output: Output.object({ schema: report }) });
        return r.output;
      },
      async options() {
        const r = await generateText({ model, prompt: ASK_WEATHER, temperature: 0, maxOutputTokens: CHAT_TOKENS,
                                       maxRetries: 0, topP: 0.9, seed: 1, stopSequences: ['\n\n'],
                                       presencePenalty: 0.1, frequencyPenalty: 0.1, providerOptions: commonOptions });
        return r.text;
      },
    };
  };
}

// LangChain.js: ChatOpenAI for the chat, a LangGraph ReAct agent (createReactAgent) for the tool
// loop and the structured answer (its responseFormat).
function langchain({ require, base }) {
  const { ChatOpenAI } = require('@langchain/openai');
  const { createReactAgent } = require('@langchain/langgraph/prebuilt');
  const { tool } = require('@langchain/core/tools');
  const { HumanMessage, SystemMessage, ToolMessage } = require('@langchain/core/messages');
  const llm = (maxTokens) => new ChatOpenAI({ model: 'kamera', apiKey: 'none', configuration: { baseURL: `${base}/v1` },
                                              temperature: 0, maxTokens, maxRetries: 0 });
  return {
    async chat(stream) {
      const model = llm(CHAT_TOKENS);
      const messages = [new SystemMessage(SYSTEM)], turns = [];
      for (const content of TURNS) {
        messages.push(new HumanMessage(content));
        let r;
        if (stream) for await (const c of await model.stream(messages)) r = r ? r.concat(c) : c;
        else r = await model.invoke(messages);
        messages.push(r);
        const u = r.usage_metadata;
        turns.push({ text: r.text, prompt: u?.input_tokens, cached: u?.input_token_details?.cache_read ?? null });
      }
      return turns;
    },
    async tools(weather, onCall) {
      const getWeather = tool(async (args) => forecast(onCall(args)),
                              { name: 'get_weather', description: 'The weather in a city', schema: weather });
      const model = llm(TOOL_TOKENS);
      // The first call forced: the agent's model is chosen per step (required until a tool answered).
      const agent = createReactAgent({
        tools: [getWeather],
        llm: (state) => model.bindTools([getWeather], {
          parallel_tool_calls: false,
          tool_choice: state.messages.some((m) => ToolMessage.isInstance(m)) ? 'auto' : 'required' }) });
      const r = await agent.invoke({ messages: [new HumanMessage(ASK_WEATHER)] }, { recursionLimit: 9 });
      const last = r.messages.at(-1);
      if (last.tool_calls?.length) throw new Error('no answer within 4 model calls');
      return last.text;
    },
    async structured(report) {
      const agent = createReactAgent({ llm: llm(OBJECT_TOKENS), tools: [], responseFormat: report });
      const r = await agent.invoke({ messages: [new HumanMessage(ASK_OBJECT)] }, { recursionLimit: 4 });
      return r.structuredResponse;
    },
    async options() {
      const model = new ChatOpenAI({ model: 'kamera', apiKey: 'none', configuration: { baseURL: `${base}/v1` },
                                     temperature: 0, maxTokens: CHAT_TOKENS, maxRetries: 0, topP: 0.9,
                                     frequencyPenalty: 0.1, presencePenalty: 0.1, stop: ['\n\n'], user: 'u1',
                                     n: 1, streamUsage: true, reasoning: { effort: 'none' }, promptCacheKey: 'k1' });
      return (await model.invoke([new HumanMessage(ASK_WEATHER)])).text;
    },
  };
}

// The official `@anthropic-ai/sdk` client's Messages API.
function anthropic({ require, base }) {
  const { Anthropic } = require('@anthropic-ai/sdk');
  const { zodOutputFormat } = require('@anthropic-ai/sdk/helpers/zod');
  const { zodToJsonSchema } = jsonSchemaOf(require);
  const client = new Anthropic({ baseURL: base, apiKey: 'none', maxRetries: 0 });
  const req = { model: 'kamera', temperature: 0 };
  const textOf = (m) => m.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
  return {
    async chat(stream) {
      const messages = [], turns = [];
      for (const content of TURNS) {
        messages.push({ role: 'user', content });
        const body = { ...req, system: SYSTEM, messages, max_tokens: CHAT_TOKENS };
        const m = stream ? await client.messages.stream(body).finalMessage() : await client.messages.create(body);
        messages.push({ role: 'assistant', content: m.content });
        // Anthropic's accounting: the prompt is input + cache_creation + cache_read input tokens.
        const u = m.usage;
        turns.push({ text: textOf(m), prompt: u.input_tokens + (u.cache_creation_input_tokens ?? 0) +
                       (u.cache_read_input_tokens ?? 0), cached: m.usage.cache_read_input_tokens });
      }
      return turns;
    },
    async tools(weather, onCall) {
      const tools = [{ name: 'get_weather', description: 'The weather in a city', input_schema: zodToJsonSchema(weather) }];
      const messages = [{ role: 'user', content: ASK_WEATHER }];
      for (let step = 0; step < 4; ++step) {
        const m = await client.messages.create({ ...req, messages, tools, max_tokens: TOOL_TOKENS,
          tool_choice: step === 0 ? { type: 'tool', name: 'get_weather', disable_parallel_tool_use: true }
                                  : { type: 'auto', disable_parallel_tool_use: true } });
        messages.push({ role: 'assistant', content: m.content });
        const calls = m.content.filter((b) => b.type === 'tool_use');
        if (!calls.length) return textOf(m);
        messages.push({ role: 'user', content: calls.map((c) => (
          { type: 'tool_result', tool_use_id: c.id, content: forecast(onCall(c.input)) })) });
      }
      throw new Error('no answer within 4 model calls');
    },
    async structured(report) {
      const m = await client.messages.parse({ ...req, messages: [{ role: 'user', content: ASK_OBJECT }],
                                              max_tokens: OBJECT_TOKENS, output_config: { format: zodOutputFormat(report) } });
      return m.parsed_output;
    },
    async options() {
      const m = await client.messages.create({
        ...req, messages: [{ role: 'user', content: ASK_WEATHER }], max_tokens: CHAT_TOKENS, top_p: 0.9, top_k: 40,
        stop_sequences: ['\n\n'], metadata: { user_id: 'u1' }, service_tier: 'auto', thinking: { type: 'disabled' },
        system: [{ type: 'text', text: SYSTEM, cache_control: { type: 'ephemeral' } }] });
      return textOf(m);
    },
  };
}

// zod's own JSON Schema (zod 4's z.toJSONSchema), for the SDKs whose tools take a plain schema.
function jsonSchemaOf(require) {
  const { z } = require('zod');
  return { zodToJsonSchema: (s) => { const j = z.toJSONSchema(s); delete j.$schema; return j; } };
}

export const ROWS = {
  'openai-chat': { label: '`openai` chat.completions', pkgs: ['openai'], make: openaiChat },
  'openai-responses': { label: '`openai` responses', pkgs: ['openai'], make: openaiResponses },
  'agents-responses': { label: '`@openai/agents`, its default (Responses) model', pkgs: ['@openai/agents'],
                        make: openaiAgents(true) },
  'agents-chat': { label: '`@openai/agents`, OpenAIChatCompletionsModel', pkgs: ['@openai/agents'],
                   make: openaiAgents(false) },
  'ai-compatible': { label: '`ai` + `@ai-sdk/openai-compatible`', pkgs: ['ai', '@ai-sdk/openai-compatible'],
                     make: aiSdk((require, baseURL) => require('@ai-sdk/openai-compatible').createOpenAICompatible({
                       name: 'kamera', baseURL, includeUsage: true, supportsStructuredOutputs: true })('kamera'),
                     {}, { kamera: { parallel_tool_calls: false } }, { kamera: { user: 'u1' } }) },
  // Its default store: true sends earlier replies as item_reference items: the server resolves
  // them from the responses it stored.
  'ai-openai': { label: '`ai` + `@ai-sdk/openai` (its default: Responses, `store: true`)', pkgs: ['ai', '@ai-sdk/openai'],
                 make: aiSdk((require, baseURL) => require('@ai-sdk/openai').createOpenAI({ baseURL, apiKey: 'none' })('kamera'),
                             {}, { openai: { parallelToolCalls: false } },
                             { openai: { user: 'u1', safetyIdentifier: 'u1', promptCacheKey: 'k1',
                                         serviceTier: 'auto', metadata: { run: 'matrix' }, reasoningEffort: 'none',
                                         textVerbosity: 'medium', truncation: 'disabled' } }) },
  'langchain': { label: '`@langchain/openai` + `@langchain/langgraph` ReAct agent',
                 pkgs: ['@langchain/openai', '@langchain/core', '@langchain/langgraph'], make: langchain },
  'anthropic': { label: '`@anthropic-ai/sdk` messages', pkgs: ['@anthropic-ai/sdk'], make: anthropic },
};
