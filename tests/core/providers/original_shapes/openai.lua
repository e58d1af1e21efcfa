-- Test fixture in the shape of the Go original's OpenAI adapter (written for these tests):
-- static headers only, no build_headers; the stream hands `delta.tool_calls` on untouched, so
-- tool-call fragments arrive in OpenAI's nested shape {index, id, type, function = {name, arguments}}.
local adapter = {}

adapter.name = "openai"
adapter.version = "0.9.0-fixture"
adapter.endpoint = "/chat/completions"
adapter.headers = {}

function adapter.transform_request(raw_body)
    local ok, req = pcall(json.decode, raw_body)
    if not ok or type(req) ~= "table" then return raw_body end
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
    local out = { content = "", finish_reason = "", token_usage = { prompt = 0, completion = 0, total = 0 } }
    if type(resp.usage) == "table" then
        out.token_usage.prompt = resp.usage.prompt_tokens or 0
        out.token_usage.completion = resp.usage.completion_tokens or 0
        out.token_usage.total = resp.usage.total_tokens or 0
    end
    local choice = type(resp.choices) == "table" and resp.choices[1] or nil
    if choice then
        local msg = choice.message or {}
        out.content = msg.content or ""
        out.finish_reason = choice.finish_reason or ""
        if type(msg.tool_calls) == "table" then
            local calls = {}
            for _, tc in ipairs(msg.tool_calls) do
                local fn = tc["function"] or {}
                local args_ok, args = pcall(json.decode, fn.arguments or "{}")
                table.insert(calls, { id = tc.id, type = "function", name = fn.name,
                                      arguments = (args_ok and type(args) == "table") and args or {} })
            end
            out.tool_calls = calls
        end
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
        out.tool_calls = delta.tool_calls
    end
    return json.encode(out)
end

return adapter
