-- Test fixture in the shape of the Go original's Anthropic adapter (written for these tests):
-- a static anthropic-version header and no build_headers, so the key header is the runtime's
-- business; streamed tool_use blocks are re-emitted in OpenAI's nested shape
-- {index, id, type, function = {name, arguments}} with empty id/name on continuation fragments.
local adapter = {}

adapter.name = "anthropic"
adapter.version = "0.9.0-fixture"
adapter.endpoint = "/v1/messages"
adapter.headers = {
    ["anthropic-version"] = "2023-06-01"
}

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
    local msgs, system = {}, ""
    for _, m in ipairs(req.messages or {}) do
        if m.role == "system" then
            system = system .. text_of(m.content) .. "\n"
        elseif m.role == "tool" then
            local block = { type = "tool_result", tool_use_id = m.tool_call_id, content = text_of(m.content) }
            local last = msgs[#msgs]
            if last and last.role == "user" and type(last.content) == "table" and last.content[1].type == "tool_result" then
                table.insert(last.content, block)
            else
                table.insert(msgs, { role = "user", content = { block } })
            end
        elseif m.role == "assistant" and type(m.tool_calls) == "table" then
            local blocks = {}
            if text_of(m.content) ~= "" then table.insert(blocks, { type = "text", text = text_of(m.content) }) end
            for _, tc in ipairs(m.tool_calls) do
                local args_ok, input = pcall(json.decode, tc["function"].arguments or "{}")
                table.insert(blocks, { type = "tool_use", id = tc.id, name = tc["function"].name,
                                       input = (args_ok and type(input) == "table") and input or {} })
            end
            table.insert(msgs, { role = "assistant", content = blocks })
        else
            table.insert(msgs, { role = m.role, content = text_of(m.content) })
        end
    end
    local out = {
        model = req.model or "claude-sonnet-4-20250514",
        max_tokens = req.max_tokens or 4096,
        messages = msgs,
        stream = req.stream or false,
    }
    if system ~= "" then out.system = system end
    if type(req.tools) == "table" and #req.tools > 0 then
        local tools = {}
        for _, t in ipairs(req.tools) do
            local fn = t["function"] or {}
            table.insert(tools, { name = fn.name, description = fn.description or "",
                                  input_schema = fn.parameters or { type = "object" } })
        end
        out.tools = tools
    end
    return json.encode(out)
end

function adapter.transform_response(raw_body)
    local ok, resp = pcall(json.decode, raw_body)
    if not ok or type(resp) ~= "table" then return raw_body end
    local out = { content = "", finish_reason = resp.stop_reason or "",
                  token_usage = { prompt = 0, completion = 0, total = 0 } }
    if resp.usage then
        out.token_usage.prompt = resp.usage.input_tokens or 0
        out.token_usage.completion = resp.usage.output_tokens or 0
        out.token_usage.total = out.token_usage.prompt + out.token_usage.completion
    end
    local calls = {}
    for _, block in ipairs(resp.content or {}) do
        if block.type == "text" then
            out.content = out.content .. (block.text or "")
        elseif block.type == "tool_use" then
            table.insert(calls, { id = block.id, type = "function", name = block.name, arguments = block.input })
        end
    end
    if #calls > 0 then out.tool_calls = calls end
    return json.encode(out)
end

function adapter.transform_stream_chunk(raw_chunk)
    local ok, chunk = pcall(json.decode, raw_chunk)
    if not ok or type(chunk) ~= "table" then return "" end
    if chunk.type == "content_block_start" and chunk.content_block and chunk.content_block.type == "tool_use" then
        return json.encode({ content = "", done = false, tool_calls = { {
            index = chunk.index or 0, id = chunk.content_block.id or "", type = "function",
            ["function"] = { name = chunk.content_block.name or "", arguments = "" } } } })
    end
    if chunk.type == "content_block_delta" and chunk.delta then
        if chunk.delta.type == "input_json_delta" then
            return json.encode({ content = "", done = false, tool_calls = { {
                index = chunk.index or 0, id = "", type = "function",
                ["function"] = { name = "", arguments = chunk.delta.partial_json or "" } } } })
        end
        return json.encode({ content = chunk.delta.text or "", done = false })
    end
    if chunk.type == "message_delta" then
        return json.encode({ content = "", done = (chunk.delta and chunk.delta.stop_reason ~= nil) })
    end
    if chunk.type == "message_stop" then
        return json.encode({ content = "", done = true })
    end
    return ""
end

return adapter
