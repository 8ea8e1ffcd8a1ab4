-- One editing session in a real Neovim (0.7 or later), run headless by
-- tests/test_editor_neovim.py: open a file, start autograd-fix's language server with
-- Neovim's own LSP client, wait for the diagnostics it publishes, ask for a hover and
-- the code actions at the first one, apply the AGF001 fix, and write what was seen
-- (and the buffer's text after the fix) as JSON to $AGF_OUT.
local out = vim.env.AGF_OUT
local file = vim.env.AGF_FILE
vim.cmd('edit ' .. file)
local buf = vim.api.nvim_get_current_buf()
local client_id = vim.lsp.start_client({name = 'autograd-fix', cmd = {vim.env.AGF_PYTHON, '-m', 'autograd_fix', 'server'}, root_dir = vim.fn.fnamemodify(file, ':h')})
vim.lsp.buf_attach_client(buf, client_id)
local result = {diagnostics = {}, actions = {}}
result.published = vim.wait(60000, function() return #vim.diagnostic.get(buf) > 0 end, 50)
for _, d in ipairs(vim.diagnostic.get(buf)) do
  table.insert(result.diagnostics, {lnum = d.lnum, col = d.col, message = d.message, source = d.source, code = d.code or (d.user_data and d.user_data.lsp and d.user_data.lsp.code)})
end
if #result.diagnostics > 0 then
  local d = vim.diagnostic.get(buf)[1]
  vim.api.nvim_win_set_cursor(0, {d.lnum + 1, d.col})
  local hover = vim.lsp.buf_request_sync(buf, 'textDocument/hover', vim.lsp.util.make_position_params(), 20000)
  for _, r in pairs(hover or {}) do result.hover = r.result and r.result.contents and r.result.contents.value end
  local params = vim.lsp.util.make_range_params()
  params.context = {diagnostics = {}}
  local actions = vim.lsp.buf_request_sync(buf, 'textDocument/codeAction', params, 20000)
  for _, r in pairs(actions or {}) do
    for _, action in ipairs(r.result or {}) do
      table.insert(result.actions, action.title)
      if action.title:find('^Fix AGF001') then vim.lsp.util.apply_workspace_edit(action.edit, 'utf-16') end
    end
  end
end
result.text = table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), '\n') .. '\n'
vim.fn.writefile({vim.fn.json_encode(result)}, out)
vim.lsp.stop_client(client_id)
vim.cmd('qa!')
