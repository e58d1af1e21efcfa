-- Test fixture in the shape of the Go original's Mistral/Groq/GitHub adapters (written for these
-- tests): an OpenAI-compatible endpoint under /v1, streamed tool calls flattened to
-- {id, type, name, raw_arguments, stream_index}.
local adapter = {}

adapter.name = "mistral"
adapter.version = "0.9.0-fixture"
adapter.endpoint = "/v1/chat/completions"
adapter.headers = {}

function adapter.transform_request(raw_body)
    local ok, req = pcall(json.decode, raw_body)
    if not ok or type(req) ~= "table" then return raw_body end
    req.model = req.model or "mistral-large-latest"
    req.disable_thinking = nil
    req.extra_body = nil
    for _, m in ipairs(req.messages or {}) do
        m.reasoning_content = nil
    end
    return json.encode(req)
end

function adapter.transform_response(raw_body)
    local ok, resp = pcall(json.decode, raw_body)
    if not ok or type(resp) ~= "table" then return raw_body end
    local out = { content = "", finish_reason = "" }
    local choice = type(resp.choices) == "table" and resp.choices[1] or nil
    if choice then
        local msg = choice.message or {}
        out.content = msg.content or ""
        out.finish_reason = choice.finish_reason or ""
        if type(msg.tool_calls) == "table" then
            local calls = {}
            for _, tc in ipairs(msg.tool_calls) do
                local fn = tc["function"] or {}
                table.insert(calls, { id = tc.id, type = "function", name = fn.name, arguments = fn.arguments })
            end
            out.tool_calls = calls
        end
    end
    if type(resp.usage) == "table" then
        out.token_usage = { prompt = resp.usage.prompt_tokens or 0, completion = resp.usage.completion_tokens or 0,
                            total = resp.usage.total_tokens or 0 }
    end
    return json.encode(out)
end

function adapter.transform_stream_chunk(raw_chunk)
    local ok, chunk = pcall(json.decode, raw_chunk)
    if not ok or type(chunk) ~= "table" then return "" end
    if type(chunk.choices) ~= "table" or #chunk.choices == 0 then return "" end
    local choice = chunk.choices[1]
    local delta = choice.delta or {}
    local out = { content = delta.content or "", done = choice.finish_reason ~= nil }
    if delta.tool_calls then
        local calls = {}
        for _, tc in ipairs(delta.tool_calls) do
            local fn = tc["function"] or {}
            table.insert(calls, { id = tc.id or "", type = "function", name = fn.name or "",
                                  raw_arguments = fn.arguments or "", stream_index = tc.index or 0 })
        end
        out.tool_calls = calls
    end
    return json.encode(out)
end

return adapter
