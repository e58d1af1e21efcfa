---@meta
-- Mock of the HomeAgent Lua plugin SDK, for editor completion only (never loaded at run time).
-- Data functions return (result, err): err is nil on success. Registration failures raise.

---@class HomeAgentSDK
sdk = {}

---Write to the plugin's log. level: "debug" | "info" | "warn" | "error".
---@param level string
---@param msg string|nil
function sdk.log(level, msg) end

---Register a tool. def: {description=, parameters=<JSON schema table>, no_memory=, parallel_safe=,
---serial=, timeout=, cleaner=function(text) return text end}. handler(args) returns a string or a
---table (sent as JSON), or nil, err.
---@param name string
---@param def table
---@param handler fun(args: table): any, string|nil
function sdk.register_tool(name, def, handler) end

---Register a stage handler. stage: on_input | pre_action | post_action | before_toolcall |
---after_toolcall | before_output | after_output. handler(ctx, call, result): ctx fields raw_message,
---user_id, group_id, phase (read only), llm_text, final_text, no_memory, response, tool_calls,
---tool_results, extra, drop. Return a string from before_toolcall to reject the call; return
---nil, err to report an error. scope: nil | "global" | "own_tools".
---@param stage string
---@param handler fun(ctx: table, call: table|nil, result: table|nil): string|nil, string|nil
---@param scope string|nil
function sdk.register_stage(stage, handler, scope) end

---Register an output channel; handler(payload, meta, type) returns a string or nil, err.
---@param name string
---@param caps integer  1 text, 2 file, 4 image, 8 audio, 16 structured
---@param desc string
---@param def table  {sync=, no_memory=, help=, cleaner=}
---@param handler fun(payload: string, meta: table, kind: string): string|nil, string|nil
function sdk.register_output_channel(name, caps, desc, def, handler) end

---Declare an input channel you inject on. def: {no_memory=, context_policy=, recall_policy=, cleaner=}
function sdk.register_input_channel(name, def) end

function sdk.register_api(name) end
function sdk.set_auto_restart(enabled) end

---Own settings (plugin.<name>.<key>).
function sdk.get_setting(key) end
function sdk.set_setting(key, value) end

---Inject input (capability "io"): (source, channel, text) or (channel, text).
function sdk.inject_text(source, channel, text) end
function sdk.inject_interrupt(source, channel, text) end
function sdk.inject_text_no_memory(source, channel, text) end

sdk.settings = {
  get_core = function(key) end, set_core = function(key, value) end, list_core = function(prefix) end,
  get_plugin = function(plugin, key) end, set_plugin = function(plugin, key, value) end,
  list_plugin = function(plugin, prefix) end, list = function() end, defs = function(prefix) end,
  dump = function() end, plugins = function() end, register_def = function(def) end,
}
sdk.memory = { recall = function(query, depth) end, commit = function(triples) end,
  introspect = function() end, merge = function(source, target) end, purge = function(criteria, hard) end }
sdk.doc = { query = function(text, top_k) end, insert = function(doc) end, remove = function(id) end,
  stats = function() end }
sdk.knowledge = { search = function(query, limit) end, add = function(name, content) end, list = function() end }
sdk.text_memory = { append = function(event) end }
sdk.llm = { list_sources = function() end, set_source = function(name) end, current_source = function() end,
  chat = function(prompt) end }
sdk.social = { get_person = function(name) end, get_network = function(name, depth) end,
  get_trait = function(name, trait) end, get_relations = function(name) end, list_persons = function() end }

---HTTP (capability "http"): returns {status=, body=, headers=} or nil, err.
sdk.http = {
  get = function(url, headers) end,
  post = function(url, body, content_type, headers) end,
}
sdk.json = { encode = function(value) end, decode = function(text) end, null = {}, array = function(t) end }

return sdk
