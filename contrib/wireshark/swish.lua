-- SwiSh (specs/swish.md §4; docs/wire.md "SwiSh") for Wireshark.
-- Replication traffic goes to UDP 47000: the 8-byte common header, then the
-- SRO, EWO or SDW body. The DDoS baseline's push digests go to UDP 47010.
-- The read-from-tail tunnel is plain IP-in-IP (protocol 4), which
-- Wireshark dissects itself.
--   tshark -X lua_script:contrib/wireshark/swish.lua -r capture.pcap

local p = Proto("swish", "SwiSh")
local pd = Proto("swish_digest", "SwiSh DDoS digest")

local protos = { [1] = "SRO", [2] = "EWO", [3] = "SDW" }
local sro_types = {
  [0x01] = "WRITE_REQ", [0x02] = "WRITE", [0x03] = "WRITE_ACK",
  [0x04] = "SNAP_WRITE", [0x05] = "SNAP_ACK", [0x06] = "SHADOW_ACK",
}
local ewo_types = { [0x01] = "UPDATE", [0x02] = "SYNC" }
local sdw_types = { [0x01] = "DATA", [0x02] = "ACK", [0x03] = "READY" }
local merge_kinds = { [1] = "LWW", [2] = "GCNT", [3] = "PNCNT", [4] = "GSET", [5] = "MAX" }

local f = p.fields
f.version = ProtoField.uint8("swish.version", "Version", base.DEC, nil, 0xF0)
f.proto = ProtoField.uint8("swish.proto", "Protocol", base.DEC, protos, 0x0F)
f.type = ProtoField.uint8("swish.type", "Type", base.HEX)
f.flags = ProtoField.uint8("swish.flags", "Flags", base.HEX)
f.flag_ack = ProtoField.bool("swish.flags.ack", "ACK", 8, nil, 0x01)
f.flag_retx = ProtoField.bool("swish.flags.retx", "RETX", 8, nil, 0x02)
f.flag_last = ProtoField.bool("swish.flags.last", "LAST", 8, nil, 0x04)
f.flag_noop = ProtoField.bool("swish.flags.noop", "NOOP", 8, nil, 0x08)
f.flag_snapshot = ProtoField.bool("swish.flags.snapshot", "SNAPSHOT", 8, nil, 0x10)
f.group = ProtoField.uint8("swish.group", "Group", base.DEC)
f.src_rid = ProtoField.uint16("swish.src_rid", "Source replica", base.DEC)
f.dst_rid = ProtoField.uint16("swish.dst_rid", "Destination replica", base.DEC)
-- SRO
f.seq = ProtoField.uint32("swish.sro.seq", "Sequence", base.DEC)
f.origin = ProtoField.uint16("swish.sro.origin_rid", "Origin replica", base.DEC)
f.var_id = ProtoField.uint16("swish.var_id", "Variable", base.DEC)
f.req_id = ProtoField.uint32("swish.sro.req_id", "Request id", base.DEC)
f.key_len = ProtoField.uint8("swish.sro.key_len", "Key length", base.DEC)
f.val_len = ProtoField.uint8("swish.sro.val_len", "Value length", base.DEC)
f.key = ProtoField.bytes("swish.sro.key", "Key")
f.value = ProtoField.bytes("swish.sro.value", "Value")
-- EWO
f.kind = ProtoField.uint8("swish.ewo.merge_kind", "Merge kind", base.DEC, merge_kinds)
f.nvals = ProtoField.uint8("swish.ewo.nvals", "Values", base.DEC)
f.index = ProtoField.uint32("swish.ewo.index", "Index", base.DEC)
f.slot_base = ProtoField.uint16("swish.ewo.slot_base", "Slot base", base.DEC)
f.ewo_val = ProtoField.uint32("swish.ewo.value", "Value", base.DEC)
-- SDW
f.win = ProtoField.uint32("swish.sdw.win", "Window", base.DEC)
f.col = ProtoField.uint32("swish.sdw.col", "Column", base.DEC)
f.ncols = ProtoField.uint32("swish.sdw.ncols", "Columns", base.DEC)
f.coll = ProtoField.uint16("swish.sdw.coll_id", "Collection", base.DEC)
f.nrows = ProtoField.uint8("swish.sdw.nrows", "Rows", base.DEC)
f.sdw_val = ProtoField.uint32("swish.sdw.value", "Value", base.HEX)
-- DDoS digest
local g = pd.fields
g.src = ProtoField.ipv4("swish_digest.src_ip", "Source")
g.est = ProtoField.uint32("swish_digest.local_est", "Local estimate", base.DEC)
g.rid = ProtoField.uint16("swish_digest.rid", "Replica", base.DEC)

local function pad4(n) return math.floor((n + 3) / 4) * 4 end

local function sro(buf, t, off, ty)
  if buf:len() < off + 16 then return nil end
  t:add(f.seq, buf(off, 4))
  t:add(f.origin, buf(off + 4, 2))
  t:add(f.var_id, buf(off + 6, 2))
  t:add(f.req_id, buf(off + 8, 4))
  local kl, vl = buf(off + 12, 1):uint(), buf(off + 13, 1):uint()
  t:add(f.key_len, buf(off + 12, 1))
  t:add(f.val_len, buf(off + 13, 1))
  local k = off + 16
  if buf:len() < k + pad4(kl) + pad4(vl) then return nil end
  if kl > 0 then t:add(f.key, buf(k, kl)) end
  if vl > 0 then t:add(f.value, buf(k + pad4(kl), vl)) end
  return (sro_types[ty] or "SRO?") .. " seq=" .. buf(off, 4):uint()
end

local function ewo(buf, t, off, ty)
  if buf:len() < off + 12 then return nil end
  t:add(f.var_id, buf(off, 2))
  t:add(f.kind, buf(off + 2, 1))
  local n = buf(off + 3, 1):uint()
  t:add(f.nvals, buf(off + 3, 1))
  t:add(f.index, buf(off + 4, 4))
  t:add(f.slot_base, buf(off + 8, 2))
  if buf:len() < off + 12 + 4 * n then return nil end
  for i = 0, n - 1 do t:add(f.ewo_val, buf(off + 12 + 4 * i, 4)) end
  return (ewo_types[ty] or "EWO?") .. " var=" .. buf(off, 2):uint() .. " index=" .. buf(off + 4, 4):uint()
end

local function sdw(buf, t, off, ty)
  if buf:len() < off + 16 then return nil end
  t:add(f.win, buf(off, 4))
  t:add(f.col, buf(off + 4, 4))
  t:add(f.ncols, buf(off + 8, 4))
  t:add(f.coll, buf(off + 12, 2))
  t:add(f.nrows, buf(off + 14, 1))
  if ty == 0x01 then
    if buf:len() < off + 28 then return nil end
    for i = 0, 2 do t:add(f.sdw_val, buf(off + 16 + 4 * i, 4)) end
  end
  return (sdw_types[ty] or "SDW?") .. " win=" .. buf(off, 4):uint() .. " col=" .. buf(off + 4, 4):uint()
end

function p.dissector(buf, pinfo, tree)
  if buf:len() < 8 then return 0 end
  local vp = buf(0, 1):uint()
  local version, proto = math.floor(vp / 16), vp % 16
  if version ~= 1 or protos[proto] == nil then return 0 end
  pinfo.cols.protocol = "SwiSh/" .. protos[proto]
  local t = tree:add(p, buf())
  t:add(f.version, buf(0, 1))
  t:add(f.proto, buf(0, 1))
  local ty = buf(1, 1):uint()
  local names = ({ sro_types, ewo_types, sdw_types })[proto]
  t:add(f.type, buf(1, 1)):append_text(" (" .. (names[ty] or "unknown") .. ")")
  local ft = t:add(f.flags, buf(2, 1))
  ft:add(f.flag_ack, buf(2, 1))
  ft:add(f.flag_retx, buf(2, 1))
  ft:add(f.flag_last, buf(2, 1))
  ft:add(f.flag_noop, buf(2, 1))
  ft:add(f.flag_snapshot, buf(2, 1))
  t:add(f.group, buf(3, 1))
  t:add(f.src_rid, buf(4, 2))
  t:add(f.dst_rid, buf(6, 2))
  local info
  if proto == 1 then info = sro(buf, t, 8, ty)
  elseif proto == 2 then info = ewo(buf, t, 8, ty)
  else info = sdw(buf, t, 8, ty) end
  pinfo.cols.info = (info or "truncated") .. " rid " .. buf(4, 2):uint() .. " -> " .. buf(6, 2):uint()
  return buf:len()
end

function pd.dissector(buf, pinfo, tree)
  if buf:len() < 12 then return 0 end
  pinfo.cols.protocol = "SwiSh digest"
  local t = tree:add(pd, buf(0, 12))
  t:add(g.src, buf(0, 4))
  t:add(g.est, buf(4, 4))
  t:add(g.rid, buf(8, 2))
  pinfo.cols.info = "suspicious " .. tostring(buf(0, 4):ipv4()) .. " est=" .. buf(4, 4):uint()
  return 12
end

DissectorTable.get("udp.port"):add(47000, p)
DissectorTable.get("udp.port"):add(47010, pd)
