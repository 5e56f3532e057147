/**
 * An instance group's name (MOORING_INSTANCE_GROUP, a session's `group`): short and plain, since it
 * is shown in lists, logs and the console and compared as text.
 */
export const GROUP_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
