// Where the reused prompt tokens of a replay (scripts/replay.mjs) came from: per model, kamera arm
// and trace, the share of the prompt tokens each usage.kamera.segments source served (exact:
// prefix and context-exact; orbit: context-orbit; nearest: context-nearest, patch-nearest, keep,
// store-patch-nearest; recomputed: prompt tokens less cached ones), with the arm's KL at the first position and argmax agreement
// against its reference as replay.json has them. Reads one or more replay.json files, each with
// a label: node scripts/replay_sources.mjs LABEL=OUT/replay.json ...
import fs from 'node:fs';

const KIND = { prefix: 'exact', 'context-exact': 'exact', 'patch-exact': 'exact', 'store-patch': 'exact',
               'context-orbit': 'orbit', 'context-nearest': 'nearest', 'patch-nearest': 'nearest',
               keep: 'nearest', 'store-patch-nearest': 'nearest', recomputed: 'recomputed' };
const pct = (x, all) => (all ? ((100 * x) / all).toFixed(1) : '-');

const rows = ['| run | model | arm | trace | exact % | orbit % | nearest % | recomputed % | KL first | agreement |',
              '|---|---|---|---|---|---|---|---|---|---|'];
for (const spec of process.argv.slice(2)) {
  const [label, file] = spec.includes('=') ? spec.split('=') : [spec, spec];
  const report = JSON.parse(fs.readFileSync(file, 'utf8'));
  for (const model of report.models)
    for (const r of model.results) {
      if (r.error || r.server !== 'kamera' || !r.refCandidates) continue;
      for (const [trace, turns] of Object.entries(r.traces)) {
        // Shares of the prompt tokens: the recomputed ones are the usage's (prompt - cached: the
        // segments list leaves the query's run out); the anchor (cached, in no segment) is in none.
        const n = { exact: 0, orbit: 0, nearest: 0, recomputed: 0 };
        let all = 0;
        for (const t of turns) {
          if (t.error) continue;
          all += t.prompt_tokens;
          n.recomputed += t.recomputed;
          for (const s of t.kamera_usage?.segments ?? [])
            if (KIND[s.source] && KIND[s.source] !== 'recomputed') n[KIND[s.source]] += s.tokens;
        }
        const sum = r.summary?.[trace] ?? {};
        rows.push(`| ${label} | ${model.name} | ${r.arm} | ${trace} | ${pct(n.exact, all)} | ${pct(n.orbit, all)} | ` +
                  `${pct(n.nearest, all)} | ${pct(n.recomputed, all)} | ${sum.kl_first?.toFixed(4) ?? '-'} | ` +
                  `${sum.agreement === undefined || sum.agreement === null ? '-' : (100 * sum.agreement).toFixed(1)} |`);
      }
    }
}
console.log(rows.join('\n'));
