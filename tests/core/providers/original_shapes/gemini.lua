-- Test fixture in the shape of the Go original's Gemini adapter (written for these tests): the
-- endpoint names the models collection ("/v1/models") and leaves "/{model}:generateContent" to
-- the runtime; no headers and no build_headers, so the key header is the runtime's business.
-- Streamed function calls carry their argument object as raw_arguments.
local adapter = {}

adapter.name = "gemini"
adapter.version = "0.9.0-fixture"
adapter.endpoint = "/v1/models"
adapter.headers = {}

local function text_of(content)
    if type(content) == "string" then return content end
    local t = ""
    for _, p in ipairs(content or {}) do
        if p.type == "text" and p.text then t = t .. p.text end
    end
    return t
end

function adapter.transform_request(raw_body)
    local ok, req = pcall(json.decode, raw_body)
    if not ok or type(req) ~= "table" then return raw_body end
    local contents, system, names = {}, "", {}
    for _, m in ipairs(req.messages or {}) do
        if m.role == "system" then
            system = system .. text_of(m.content) .. "\n"
        elseif m.role == "tool" then
            table.insert(contents, { role = "user", parts = { { functionResponse = {
                name = names[m.tool_call_id] or "tool", response = { result = text_of(m.content) } } } } })
        elseif m.role == "assistant" then
            local parts = {}
            if text_of(m.content) ~= "" then table.insert(parts, { text = text_of(m.content) }) end
            for _, tc in ipairs(m.tool_calls or {}) do
                names[tc.id] = tc["function"].name
                local args_ok, args = pcall(json.decode, tc["function"].arguments or "{}")
                table.insert(parts, { functionCall = { name = tc["function"].name,
                                                       args = (args_ok and type(args) == "table") and args or {} } })
            end
            table.insert(contents, { role = "model", parts = parts })
        else
            table.insert(contents, { role = "user", parts = { { text = text_of(m.content) } } })
        end
    end
    local out = {
        contents = contents,
        generationConfig = { temperature = req.temperature or 0.7, maxOutputTokens = req.max_tokens or 4096 },
    }
    if system ~= "" then out.systemInstruction = { parts = { { text = system } } } end
    if type(req.tools) == "table" and #req.tools > 0 then
        local decls = {}
        for _, t in ipairs(req.tools) do
            local fn = t["function"] or {}
            table.insert(decls, { name = fn.name, description = fn.description or "", parameters = fn.parameters })
        end
        out.tools = { { functionDeclarations = decls } }
    end
    return json.encode(out)
end

function adapter.transform_response(raw_body)
    local ok, resp = pcall(json.decode, raw_body)
    if not ok or type(resp) ~= "table" then return raw_body end
    local out = { content = "", finish_reason = "", token_usage = { prompt = 0, completion = 0, total = 0 } }
    if resp.usageMetadata then
        out.token_usage.prompt = resp.usageMetadata.promptTokenCount or 0
        out.token_usage.completion = resp.usageMetadata.candidatesTokenCount or 0
        out.token_usage.total = resp.usageMetadata.totalTokenCount or 0
    end
    local cand = resp.candidates and resp.candidates[1]
    if cand then
        local calls = {}
        for i, part in ipairs((cand.content or {}).parts or {}) do
            if part.text then out.content = out.content .. part.text end
            if part.functionCall then
                table.insert(calls, { id = "call_" .. i, type = "function", name = part.functionCall.name,
                                      arguments = part.functionCall.args })
            end
        end
        if #calls > 0 then out.tool_calls = calls end
        out.finish_reason = cand.finishReason or ""
    end
    return json.encode(out)
end

function adapter.transform_stream_chunk(raw_chunk)
    local ok, chunk = pcall(json.decode, raw_chunk)
    if not ok or type(chunk) ~= "table" then return "" end
    if not chunk.candidates or #chunk.candidates == 0 then return "" end
    local cand = chunk.candidates[1]
    local out = { content = "", done = (cand.finishReason ~= nil) }
    local calls = {}
    for i, part in ipairs((cand.content or {}).parts or {}) do
        out.content = out.content .. (part.text or "")
        if part.functionCall then
            table.insert(calls, { id = "call_" .. i, type = "function", name = part.functionCall.name,
                                  raw_arguments = part.functionCall.args, stream_index = i - 1 })
        end
    end
    if #calls > 0 then out.tool_calls = calls end
    return json.encode(out)
end

return adapter
