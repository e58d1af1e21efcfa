-- Test fixture in the shape of the Go original's Ollama adapter (written for these tests): it
-- does not declare stream_format, so the runtime must recognise Ollama's NDJSON stream on its
-- own; streamed tool calls are flat with raw_arguments set to Ollama's argument object.
local adapter = {}

adapter.name = "ollama"
adapter.version = "0.9.0-fixture"
adapter.endpoint = "/api/chat"
adapter.headers = {}

function adapter.transform_request(raw_body)
    local ok, req = pcall(json.decode, raw_body)
    if not ok or type(req) ~= "table" then return raw_body end
    local out = {
        model = req.model or "llama3",
        stream = req.stream or false,
        options = { temperature = req.temperature or 0.7, num_predict = req.max_tokens or 2048 },
    }
    local msgs = {}
    for _, m in ipairs(req.messages or {}) do
        local msg = { role = m.role, content = type(m.content) == "string" and m.content or "" }
        if type(m.tool_calls) == "table" then
            local calls = {}
            for _, tc in ipairs(m.tool_calls) do
                local args_ok, args = pcall(json.decode, tc["function"].arguments or "{}")
                table.insert(calls, { ["function"] = { name = tc["function"].name,
                                                       arguments = (args_ok and type(args) == "table") and args or {} } })
            end
            msg.tool_calls = calls
        end
        table.insert(msgs, msg)
    end
    out.messages = msgs
    if type(req.tools) == "table" and #req.tools > 0 then out.tools = req.tools end
    return json.encode(out)
end

function adapter.transform_response(raw_body)
    local ok, resp = pcall(json.decode, raw_body)
    if not ok or type(resp) ~= "table" then return raw_body end
    local out = { content = "", finish_reason = resp.done_reason or "" }
    local p, c = resp.prompt_eval_count or 0, resp.eval_count or 0
    out.token_usage = { prompt = p, completion = c, total = p + c }
    if resp.message then
        out.content = resp.message.content or ""
        if type(resp.message.tool_calls) == "table" then
            local calls = {}
            for i, tc in ipairs(resp.message.tool_calls) do
                table.insert(calls, { id = "call_" .. i, type = "function", name = tc["function"].name,
                                      arguments = tc["function"].arguments })
            end
            out.tool_calls = calls
        end
    end
    return json.encode(out)
end

function adapter.transform_stream_chunk(raw_chunk)
    local ok, chunk = pcall(json.decode, raw_chunk)
    if not ok or type(chunk) ~= "table" then return "" end
    if not chunk.message then return "" end
    local out = { content = chunk.message.content or "", done = chunk.done or false }
    if chunk.message.tool_calls then
        local calls = {}
        for i, tc in ipairs(chunk.message.tool_calls) do
            local fn = tc["function"] or {}
            table.insert(calls, { id = tc.id or ("call_" .. i), type = "function", name = fn.name or "",
                                  raw_arguments = fn.arguments or "{}", stream_index = tc.index or (i - 1) })
        end
        out.tool_calls = calls
    end
    return json.encode(out)
end

return adapter
