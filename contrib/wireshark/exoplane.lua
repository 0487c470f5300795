-- ExoPlane (specs/exoplane.md §4; docs/wire.md "ExoPlane") for Wireshark.
--   * EXO shim, EtherType 0x88B6 (12 bytes after the Ethernet header); the
--     bytes after it go to the dissector of `next_type`, except MERGE and
--     MERGE_ACK, whose 24-byte merge body (§4.3) is decoded here.
--   * The hub <-> daemon control protocol on TCP port 7700 (§4.6): 16-byte
--     header and every message body; frames split across TCP segments are
--     reassembled. EVENT_FWD's frame goes to the Ethernet dissector.
--   * The NetCache app's header on UDP port 50000 (§7): op, seq, 128-bit
--     key, value (the rest of the datagram, at most 128 bytes).
--   tshark -X lua_script:contrib/wireshark/exoplane.lua -r capture.pcap

local ETHERTYPE = 0x88B6
local HUB_PORT = 7700
local CTL_HEADER = 16

------------------------------------------------------------------------
-- EXO shim and MERGE body
------------------------------------------------------------------------

local shim = Proto("exoplane", "ExoPlane shim")
local shim_types = {
  [1] = "TO_DEV", [2] = "FROM_DEV", [3] = "MERGE", [4] = "MERGE_ACK", [5] = "PUNT",
}
local merge_ops = { [1] = "ADD", [2] = "OR", [3] = "MAX" }

local sf = shim.fields
sf.ver = ProtoField.uint8("exoplane.ver", "Version", base.DEC, nil, 0xF0)
sf.type = ProtoField.uint8("exoplane.type", "Type", base.DEC, shim_types, 0x0F)
sf.flags = ProtoField.uint8("exoplane.flags", "Flags", base.HEX)
sf.failover = ProtoField.bool("exoplane.failover", "FAILOVER", 8, nil, 0x01)
sf.app_id = ProtoField.uint8("exoplane.app_id", "App id", base.DEC)
sf.ldev = ProtoField.uint8("exoplane.ldev", "Logical device", base.DEC)
sf.in_port = ProtoField.uint16("exoplane.in_port", "Ingress port", base.DEC)
sf.out_port = ProtoField.uint16("exoplane.out_port", "Egress port", base.DEC)
sf.next_type = ProtoField.uint16("exoplane.next_type", "Next EtherType", base.HEX)
sf.rsvd = ProtoField.uint16("exoplane.rsvd", "Reserved", base.HEX)
sf.obj_id = ProtoField.uint16("exoplane.merge.obj_id", "Object id", base.DEC)
sf.op = ProtoField.uint8("exoplane.merge.op", "Merge op", base.DEC, merge_ops)
sf.width = ProtoField.uint8("exoplane.merge.width", "Width (bits)", base.DEC)
sf.slot = ProtoField.uint32("exoplane.merge.slot", "Slot", base.DEC)
sf.round = ProtoField.uint64("exoplane.merge.round", "Round", base.DEC)
sf.delta = ProtoField.uint64("exoplane.merge.delta", "Delta", base.DEC)

local ethertype_table = DissectorTable.get("ethertype")
local data_dissector = Dissector.get("data")

function shim.dissector(buf, pinfo, tree)
  if buf:len() < 12 then return 0 end
  pinfo.cols.protocol = "EXO"
  local t = tree:add(shim, buf(0, 12))
  local ty = buf(0, 1):bitfield(4, 4)
  t:add(sf.ver, buf(0, 1))
  t:add(sf.type, buf(0, 1))
  local fl = t:add(sf.flags, buf(1, 1))
  fl:add(sf.failover, buf(1, 1))
  t:add(sf.app_id, buf(2, 1))
  t:add(sf.ldev, buf(3, 1))
  t:add(sf.in_port, buf(4, 2))
  t:add(sf.out_port, buf(6, 2))
  t:add(sf.next_type, buf(8, 2))
  t:add(sf.rsvd, buf(10, 2))
  local name = shim_types[ty] or ("type " .. ty)
  local info = "EXO " .. name .. " app=" .. buf(2, 1):uint() .. " ldev=" .. buf(3, 1):uint()
  if ty == 3 or ty == 4 then
    if buf:len() < 36 then
      pinfo.cols.info = info .. " [short merge body]"
      return buf:len()
    end
    local m = t:add(shim, buf(12, 24), "Merge body")
    m:add(sf.obj_id, buf(12, 2))
    m:add(sf.op, buf(14, 1))
    m:add(sf.width, buf(15, 1))
    m:add(sf.slot, buf(16, 4))
    m:add(sf.round, buf(20, 8))
    m:add(sf.delta, buf(28, 8))
    pinfo.cols.info = info .. " obj=" .. buf(12, 2):uint() .. " slot=" .. buf(16, 4):uint()
      .. " round=" .. buf(20, 8):uint64()
    return 36
  end
  pinfo.cols.info = info
  if buf:len() > 12 then
    local rest = buf(12):tvb()
    if not ethertype_table:try(buf(8, 2):uint(), rest, pinfo, tree) then
      data_dissector:call(rest, pinfo, tree)
    end
    -- Keep the shim visible in front of what the inner dissectors wrote.
    pinfo.cols.info = info .. " | " .. tostring(pinfo.cols.info)
  end
  return buf:len()
end

ethertype_table:add(ETHERTYPE, shim)

------------------------------------------------------------------------
-- Control protocol
------------------------------------------------------------------------

local ctl = Proto("exoctl", "ExoPlane control")
local msg_types = {
  [0x01] = "HELLO", [0x02] = "HELLO_ACK",
  [0x10] = "WRITE_REQ", [0x11] = "WRITE_APPLY", [0x12] = "WRITE_APPLIED", [0x13] = "WRITE_ACK",
  [0x20] = "PROMOTE_REPORT", [0x21] = "EVENT_FWD",
  [0x30] = "SYNC_REQ", [0x31] = "SYNC_RESP",
  [0x40] = "DUMP", [0x42] = "REJOIN", [0x43] = "REJOIN_DONE",
  [0x50] = "PING", [0x51] = "PONG",
}
local write_ops = { [1] = "INSERT_IF_ABSENT", [2] = "UPSERT", [3] = "DELETE" }
local roles = { [0] = "primary", [1] = "replica" }
local applied_status = { [0] = "OK", [1] = "FAILED" }
local ack_status = { [0] = "OK", [1] = "EXISTS", [2] = "FAILED" }

local cf = ctl.fields
cf.magic = ProtoField.uint16("exoctl.magic", "Magic", base.HEX)
cf.version = ProtoField.uint8("exoctl.version", "Version", base.DEC)
cf.type = ProtoField.uint8("exoctl.type", "Type", base.HEX, msg_types)
cf.length = ProtoField.uint32("exoctl.length", "Body length", base.DEC)
cf.req_id = ProtoField.uint64("exoctl.req_id", "Request id", base.DEC)
cf.pdev = ProtoField.uint16("exoctl.pdev", "Physical device", base.DEC)
cf.caps = ProtoField.uint32("exoctl.caps", "Capabilities", base.HEX)
cf.lost_state = ProtoField.uint8("exoctl.lost_state", "Lost state", base.DEC)
cf.round = ProtoField.uint64("exoctl.round", "Round", base.DEC)
cf.n = ProtoField.uint32("exoctl.n", "Items", base.DEC)
cf.ldev = ProtoField.uint8("exoctl.ldev", "Logical device", base.DEC)
cf.role = ProtoField.uint8("exoctl.role", "Role", base.DEC, roles)
cf.app = ProtoField.uint8("exoctl.app", "App", base.DEC)
cf.op = ProtoField.uint8("exoctl.op", "Op", base.DEC, write_ops)
cf.obj = ProtoField.uint16("exoctl.obj", "Object", base.DEC)
cf.key = ProtoField.bytes("exoctl.key", "Key")
cf.val = ProtoField.bytes("exoctl.val", "Value")
cf.entry_version = ProtoField.uint64("exoctl.entry_version", "Entry version", base.DEC)
cf.applied = ProtoField.uint8("exoctl.applied_status", "Status", base.DEC, applied_status)
cf.ack = ProtoField.uint8("exoctl.ack_status", "Status", base.DEC, ack_status)
cf.uk = ProtoField.bytes("exoctl.uk", "Union key")
cf.estimate = ProtoField.uint32("exoctl.estimate", "Estimate", base.DEC)
cf.elapsed_us = ProtoField.uint32("exoctl.elapsed_us", "Elapsed (us)", base.DEC)
cf.frame_len = ProtoField.uint16("exoctl.frame_len", "Frame length", base.DEC)
cf.snap = ProtoField.uint64("exoctl.snap", "Snapshot", base.DEC)
cf.hist = ProtoField.uint64("exoctl.hist", "History", base.DEC)
cf.h = ProtoField.uint64("exoctl.h", "H", base.DEC)
cf.last = ProtoField.uint8("exoctl.last", "Last", base.DEC)
cf.ts = ProtoField.uint64("exoctl.ts", "Timestamp", base.DEC)

local ctl_malformed = ProtoExpert.new("exoctl.malformed", "Malformed ExoPlane control body",
  expert.group.MALFORMED, expert.severity.ERROR)
ctl.experts = { ctl_malformed }

local eth_dissector = Dissector.get("eth_withoutfcs")

-- A body reader: every read checks the bounds and turns an overrun into
-- `nil`, which ends the body with a malformed mark.
local function reader(body, tree)
  local r = { off = 0 }
  function r.fixed(field, n)
    if r.off + n > body:len() then return nil end
    local range = body(r.off, n)
    tree:add(field, range)
    r.off = r.off + n
    return range
  end
  function r.key(field)
    if r.off + 1 > body:len() then return nil end
    local n = body(r.off, 1):uint()
    if r.off + 1 + n > body:len() then return nil end
    -- An empty key or value is a zero-length field after its len byte.
    tree:add(field, body(r.off + 1, n))
    r.off = r.off + 1 + n
    return n
  end
  return r
end

local function entry(r)
  return r.fixed(cf.obj, 2) and r.key(cf.key) and r.key(cf.val) and r.fixed(cf.entry_version, 8)
end

local function sync_items(r, n)
  for _ = 1, n do
    if not (r.fixed(cf.app, 1) and r.fixed(cf.obj, 2) and r.key(cf.key) and r.fixed(cf.snap, 8)
        and r.fixed(cf.hist, 8)) then
      return false
    end
  end
  return true
end

local function op_entries(r, n)
  for _ = 1, n do
    if not (r.fixed(cf.op, 1) and entry(r)) then return false end
  end
  return true
end

-- Dissects a body; returns false if it ran out of bytes.
local function body_fields(ty, body, pinfo, tree)
  local r = reader(body, tree)
  local n
  if ty == 0x01 then
    return r.fixed(cf.pdev, 2) and r.fixed(cf.caps, 4) and r.fixed(cf.lost_state, 1) and true
  elseif ty == 0x02 then
    n = r.fixed(cf.round, 8) and r.fixed(cf.n, 1)
    if not n then return false end
    for _ = 1, n:uint() do
      if not (r.fixed(cf.ldev, 1) and r.fixed(cf.role, 1)) then return false end
    end
  elseif ty == 0x10 then
    -- `uk` is inca's addition to §4.6's body (docs/wire.md).
    n = r.fixed(cf.app, 1) and r.key(cf.uk) and r.fixed(cf.n, 2)
    if not n then return false end
    for _ = 1, n:uint() do
      if not (r.fixed(cf.op, 1) and r.fixed(cf.obj, 2) and r.key(cf.key) and r.key(cf.val)) then
        return false
      end
    end
  elseif ty == 0x11 then
    n = r.fixed(cf.app, 1) and r.fixed(cf.n, 2)
    if not (n and op_entries(r, n:uint())) then return false end
  elseif ty == 0x12 then
    return r.fixed(cf.applied, 1) and true
  elseif ty == 0x13 then
    n = r.fixed(cf.n, 2)
    if not n then return false end
    for _ = 1, n:uint() do
      if not (r.fixed(cf.ack, 1) and r.fixed(cf.entry_version, 8)) then return false end
    end
  elseif ty == 0x20 then
    return r.fixed(cf.app, 1) and r.key(cf.uk) and r.fixed(cf.estimate, 4)
      and r.fixed(cf.elapsed_us, 4) and true
  elseif ty == 0x21 then
    n = r.fixed(cf.app, 1) and r.fixed(cf.frame_len, 2)
    if not n or r.off + n:uint() > body:len() then return false end
    if n:uint() > 0 then
      eth_dissector:call(body(r.off, n:uint()):tvb(), pinfo, tree)
    end
    r.off = r.off + n:uint()
  elseif ty == 0x30 or ty == 0x31 then
    n = r.fixed(cf.round, 8) and r.fixed(cf.n, 4)
    if not (n and sync_items(r, n:uint())) then return false end
  elseif ty == 0x40 then
    n = r.fixed(cf.app, 1) and r.fixed(cf.n, 4)
    if not (n and op_entries(r, n:uint()) and r.fixed(cf.last, 1)) then return false end
  elseif ty == 0x42 then
    n = r.fixed(cf.n, 4)
    if not n then return false end
    for _ = 1, n:uint() do
      if not (r.fixed(cf.app, 1) and r.fixed(cf.obj, 2) and r.key(cf.key) and r.fixed(cf.h, 8)) then
        return false
      end
    end
  elseif ty == 0x50 or ty == 0x51 then
    return r.fixed(cf.ts, 8) and true
  end
  return true
end

local function ctl_pdu_len(buf, pinfo, offset)
  return CTL_HEADER + buf(offset + 4, 4):uint()
end

local function ctl_pdu(buf, pinfo, tree)
  local len = buf(4, 4):uint()
  local ty = buf(3, 1):uint()
  local name = msg_types[ty] or string.format("type 0x%02x", ty)
  local t = tree:add(ctl, buf(0, CTL_HEADER + len), "ExoPlane control, " .. name)
  t:add(cf.magic, buf(0, 2))
  t:add(cf.version, buf(2, 1))
  t:add(cf.type, buf(3, 1))
  t:add(cf.length, buf(4, 4))
  t:add(cf.req_id, buf(8, 8))
  if buf(0, 2):uint() == 0x4558 and len > 0 then
    if not body_fields(ty, buf(CTL_HEADER, len):tvb(), pinfo, t) then
      t:add_proto_expert_info(ctl_malformed)
    end
  end
  pinfo.cols.protocol = "EXOCTL"
  local prev = tostring(pinfo.cols.info)
  local item = name .. " req=" .. buf(8, 8):uint64()
  if prev:find("EXOCTL:", 1, true) then
    -- append, not set: TCP fences the column between reassembled PDUs.
    pinfo.cols.info:append(", " .. item)
  else
    pinfo.cols.info = "EXOCTL: " .. item
  end
  return CTL_HEADER + len
end

function ctl.dissector(buf, pinfo, tree)
  dissect_tcp_pdus(buf, tree, CTL_HEADER, ctl_pdu_len, ctl_pdu, true)
  return buf:len()
end

DissectorTable.get("tcp.port"):add(HUB_PORT, ctl)

------------------------------------------------------------------------
-- NetCache header (§7)
------------------------------------------------------------------------

local NC_PORT = 50000
local NC_HEADER = 21
local NC_MAX_VALUE = 128
local nc = Proto("exonc", "ExoPlane NetCache")
local nc_ops = { [1] = "READ", [2] = "WRITE", [3] = "REPLY", [4] = "ACK" }
local ncf = nc.fields
ncf.op = ProtoField.uint8("exonc.op", "Op", base.DEC, nc_ops)
ncf.seq = ProtoField.uint32("exonc.seq", "Sequence", base.DEC)
ncf.key = ProtoField.bytes("exonc.key", "Key")
ncf.value_len = ProtoField.uint32("exonc.value_len", "Value length", base.DEC)
ncf.value = ProtoField.bytes("exonc.value", "Value")
local nc_malformed = ProtoExpert.new("exonc.malformed", "Malformed NetCache header",
  expert.group.MALFORMED, expert.severity.ERROR)
nc.experts = { nc_malformed }

function nc.dissector(buf, pinfo, tree)
  pinfo.cols.protocol = "EXONC"
  local t = tree:add(nc, buf())
  local n = buf:len()
  local op = n > 0 and buf(0, 1):uint() or 0
  if n < NC_HEADER or n > NC_HEADER + NC_MAX_VALUE or nc_ops[op] == nil then
    t:add_proto_expert_info(nc_malformed)
    pinfo.cols.info = "EXONC [malformed]"
    return n
  end
  t:add(ncf.op, buf(0, 1))
  t:add(ncf.seq, buf(1, 4))
  t:add(ncf.key, buf(5, 16))
  t:add(ncf.value_len, n - NC_HEADER)
  if n > NC_HEADER then
    t:add(ncf.value, buf(NC_HEADER))
  end
  pinfo.cols.info = "EXONC " .. nc_ops[op] .. " seq=" .. buf(1, 4):uint()
    .. " value=" .. (n - NC_HEADER) .. "B"
  return n
end

DissectorTable.get("udp.port"):add(NC_PORT, nc)
