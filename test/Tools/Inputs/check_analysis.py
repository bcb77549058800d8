"""Checks the analysis.json of `switchyard analyze` in DIR for a window of
TOKENS tokens ("-": as many as it holds): every attention map is causal, its rows are probability
distributions over the keys (memory keys first) and the maximum over
heads is the maximum of the heads where they are written; every
selection names distinct experts per head, in range, with gates in
(0, 1), highest first. With a third argument OTHER, the analysis.json in
OTHER (the same model and text on another device) has the same blocks,
attention maps within 1e-5 and the same experts. With --pieces TEXT, the
tokens are SentencePiece subwords whose labels spell TEXT (a piece's "▁"
for a space)."""
import json
import sys

args = sys.argv[1:]
pieces = None
if "--pieces" in args:
    i = args.index("--pieces")
    pieces = args[i + 1]
    del args[i:i + 2]
folder = args[0]
other = args[2] if len(args) > 2 else None
analysis = json.load(open(f"{folder}/analysis.json"))
tokens = (len(analysis["models"][0]["tokens"]) if args[1] == "-"
          else int(args[1]))
if pieces is not None:
    for model in analysis["models"]:
        spelt = "".join(model["text"]).replace("\u2581", " ")
        assert spelt.strip() == pieces.strip(), (spelt, pieces)
attention_blocks = routers = 0
for model in analysis["models"]:
    assert len(model["tokens"]) == tokens == len(model["text"]), model["text"]
    for block in model["blocks"]:
        if "attention_max" in block:
            attention_blocks += 1
            queries, keys = block["queries"], block["keys"]
            memory = keys - queries
            assert queries == tokens and memory >= 0, block["name"]
            heads = block.get("attention")
            for t, row in enumerate(block["attention_max"]):
                assert len(row) == keys
                # Query t sees the memory and the tokens up to itself.
                assert all(w == 0 for w in row[memory + t + 1:]), (block["name"], t)
                assert all(0 <= w <= 1 for w in row)
                if heads:
                    for head in heads:
                        assert abs(sum(head[t]) - 1) < 1e-5, (block["name"], t)
                    for u in range(keys):
                        assert row[u] == max(head[t][u] for head in heads)
                else:
                    assert sum(row) >= 1 - 1e-5
        for selection in block.get("selections", []):
            routers += 1
            experts, k = selection["experts"], selection["k"]
            assert selection["tokens"] >= tokens and 0 < k <= experts
            for chosen, gates in zip(selection["chosen"], selection["gates"]):
                for head_chosen, head_gates in zip(chosen, gates):
                    assert len(set(head_chosen)) == k, head_chosen
                    assert all(0 <= e < experts for e in head_chosen)
                    assert all(0 < g < 1 for g in head_gates)
                    assert head_gates == sorted(head_gates, reverse=True)
assert attention_blocks > 0, "no attention block"
print(f"{attention_blocks} attention blocks and {routers} routers checked")

if other:
    theirs = json.load(open(f"{other}/analysis.json"))
    for mine, their in zip(analysis["models"], theirs["models"], strict=True):
        for a, b in zip(mine["blocks"], their["blocks"], strict=True):
            assert a["name"] == b["name"]
            for row_a, row_b in zip(a.get("attention_max", []),
                                    b.get("attention_max", [])):
                assert max(abs(x - y) for x, y in zip(row_a, row_b)) <= 1e-5
            for s_a, s_b in zip(a.get("selections", []),
                                b.get("selections", [])):
                assert s_a["chosen"] == s_b["chosen"], a["name"]
    print(f"the same as {other}")
