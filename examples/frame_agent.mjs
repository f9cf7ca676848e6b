// An agent that watches a stream of frames through a sliding window, written with the official
// `openai` npm client and nothing of kamera: every turn it sends its whole context again (the
// window's frames as image_url parts, then its question), as an agent does against any
// OpenAI-compatible server. On a look-back turn it brings an evicted frame back in front of the
// window in place of the oldest one. `kamera serve` reuses what it has seen wherever it now sits;
// the agent changes nothing for that (scripts/demo_agent.mjs prints what was reused).
//
//   for await (const turn of watchFrames(client, { frames, window: 6, questions })) ...
//     frames     the stream, in order: data: URLs (or http URLs) of the pictures
//     questions  Map from a stream index to { text, lookBack }: the question asked once that frame
//                has arrived; lookBack, when set, is the stream index of an evicted frame to see again
// Each turn yields { step, frames (the stream indices sent, in order), question, request,
// response } where request is the body sent and response the client's answer.

export async function* watchFrames(client, { frames, window, questions, model = 'default' }) {
  const seen = [];
  for (let t = 0; t < frames.length; ++t) {
    seen.push(t);
    if (seen.length > window) seen.shift();  // the window slides: the oldest frame leaves
    const q = questions.get(t);
    if (!q) continue;
    const shown = q.lookBack == null ? [...seen] : [q.lookBack, ...seen.slice(1)];
    const request = {
      model,
      temperature: 0,
      messages: [{
        role: 'user',
        content: [...shown.map((i) => ({ type: 'image_url', image_url: { url: frames[i] } })),
                  { type: 'text', text: q.text }],
      }],
    };
    const response = await client.chat.completions.create(request);
    yield { step: t, frames: shown, question: q.text, request, response };
  }
}
