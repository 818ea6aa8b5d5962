-- cpsched: queue every new job held for the external scheduler.
--
-- Every job is submitted with priority 0 (squeue shows Reason=JobHeldUser) and tagged
-- AdminComment=<TAG>,max_nodes=<the user's maximum node count or none>. Only the bridge (root or the users in BRIDGE_UIDS) may change the
-- priority of a tagged job, i.e. release or hold it; users get a clear message instead.
-- The bridge's fallback "release" uses the same privilege to hand jobs back to Slurm.
--
-- Install: copy to the directory of slurm.conf and set JobSubmitPlugins=lua.
-- Keep TAG equal to hold_tag in the bridge's TOML (default "extsched").

local TAG = "extsched"
-- uid 0 always; add the SlurmUser's uid here if the bridge runs as SlurmUser.
local BRIDGE_UIDS = { [0] = true }
-- Partitions left to Slurm's own scheduler (jobs there are not held); e.g. { debug = true }.
local UNMANAGED_PARTITIONS = {}
-- Slurm's ESLURM_JOB_HELD: "Job is in held state, pending scheduler release". Slurm
-- 22.05 discards slurm.log_user() in job_modify, so this error code is what a user who
-- runs `scontrol release` sees; newer Slurm also prints the log_user() text.
local ESLURM_JOB_HELD = 2042
-- Touched on every submission so that the bridge plans the new job at once (its
-- wake_file; the EpilogSlurmctld script cpsched-wake touches it when a job ends).
-- Opening a file for writing never blocks slurmctld, bridge up or down.
local WAKE_FILE = "/var/lib/cpsched-bridge/wake"
local SUBMIT_NOTE = "queued for cpsched, the site's scheduler: it starts the job on the "
  .. "nodes it chooses (do not release it by hand)"

-- What the user asked as a maximum node count (-N 2, -N 1-2), recorded beside the tag:
-- Slurm 24.11 shows every held job's maximum as its minimum, so the bridge could not
-- tell -n 3 (free to spread) from -N 1 -n 3 (see slurm_bridge/slurm_tag.py).
local function node_record(job_desc)
  local most = job_desc.max_nodes
  if most == nil or most == 0 or most >= slurm.NO_VAL then
    return ",max_nodes=none"
  end
  return ",max_nodes=" .. tostring(most)
end

local function is_tagged(admin_comment)
  return admin_comment ~= nil
    and (admin_comment == TAG or string.sub(admin_comment, 1, #TAG + 1) == TAG .. ",")
end

function slurm_job_submit(job_desc, part_list, submit_uid)
  local partition = job_desc.partition
  if partition ~= nil and UNMANAGED_PARTITIONS[partition] then
    return slurm.SUCCESS
  end
  job_desc.priority = 0
  job_desc.admin_comment = TAG .. node_record(job_desc)
  slurm.log_user(SUBMIT_NOTE)
  local wake = io.open(WAKE_FILE, "w")
  if wake then
    wake:close()
  end
  return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  if BRIDGE_UIDS[modify_uid] then
    return slurm.SUCCESS
  end
  if is_tagged(job_rec.admin_comment) then
    if job_desc.priority ~= slurm.NO_VAL then
      slurm.log_user("this job is started by cpsched; it cannot be released or re-prioritised by hand")
      return ESLURM_JOB_HELD
    end
    if job_desc.admin_comment ~= nil then
      slurm.log_user("the cpsched tag of this job cannot be changed")
      return slurm.ERROR
    end
  end
  return slurm.SUCCESS
end

slurm.log_info("cpsched job_submit.lua loaded (tag %s)", TAG)
return slurm.SUCCESS
